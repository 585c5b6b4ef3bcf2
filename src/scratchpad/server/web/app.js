// The web UI's shell: the top bar's server indicator and the hash router. Routes:
//   #/                      pads list          (pads.js)
//   #/pads/<name>           a pad's notebook   (notebook.js)
//   #/pads/<name>/files/…   a pad's files      (files.js)
//   #/vault                 credentials        (vault.js, another part's module)
// Each view module exports mount(root, params) → unmount; the router unmounts the old view
// (closing its streams and timers) before it mounts the next. Nothing shows before this tab
// has a session (session.js); when it ends (logout, here or in another tab, or the server
// forgot it) the page says how to log in again.

import { getJSON, logOut } from "./api.js";
import { h, withCode } from "./dom.js";
import { HOW_TO_LOG_IN, onEnded, token } from "./session.js";

const root = document.getElementById("app");
const VIEWS = {
  pads: () => import("./pads.js"),
  notebook: () => import("./notebook.js"),
  files: () => import("./files.js"),
  vault: () => import("./vault.js"),
};
let unmount = null;
let generation = 0;
let statusTimer = null;

/** The view and its parameters for a location hash. */
export function route(hash) {
  const parts = hash.replace(/^#\/?/, "").split("?")[0].split("/");
  const decode = (part) => {
    try {
      return decodeURIComponent(part);
    } catch {
      return null;
    }
  };
  if (!parts[0]) return { view: "pads", params: {} };
  if (parts[0] === "vault") return { view: "vault", params: { rest: parts.slice(1).map(decode) } };
  if (parts[0] === "pads" && parts[1]) {
    const name = decode(parts[1]);
    if (name === null) return { view: null, params: {} };
    if (parts.length === 2) return { view: "notebook", params: { name } };
    if (parts[2] === "files") {
      const dir = parts.slice(3).filter(Boolean).map(decode);
      if (!dir.includes(null)) return { view: "files", params: { name, dir: dir.join("/") } };
    }
  }
  return { view: null, params: {} };
}

async function show() {
  const mine = ++generation;
  unmount?.();
  unmount = null;
  const { view, params } = route(location.hash);
  for (const link of document.querySelectorAll("[data-nav]")) {
    const here = link.dataset.nav === (view === "vault" ? "vault" : "pads");
    if (here) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (!view) {
    root.replaceChildren(h("section", { class: "message" }, h("h1", {}, "Not found"), h("p", {}, "Nothing lives at this address. "), h("a", { href: "#/" }, "Back to the pads")));
    return;
  }
  let module;
  try {
    module = await VIEWS[view]();
  } catch (error) {
    if (mine !== generation) return;
    root.replaceChildren(h("section", { class: "message" }, h("h1", {}, `The ${view} page did not load`), h("p", {}, `Its script could not be loaded (${error.message}). Reload the page; if this persists, this server's version may not include it.`)));
    return;
  }
  if (mine !== generation) return; // the user moved on while the module loaded
  document.title = params.name ? `${params.name} · Scratchpad` : "Scratchpad";
  unmount = module.mount(root, params) || null;
}

async function serverStatus() {
  const indicator = document.getElementById("server");
  try {
    const server = await getJSON("/v1/server");
    indicator.className = "server up";
    indicator.textContent = `server v${server.version}`;
    indicator.title = `pid ${server.pid}`;
  } catch (error) {
    indicator.className = "server down";
    indicator.textContent = error.status === 401 ? "not signed in" : "server unreachable";
    indicator.title = error.message;
  }
}

/** The page without a session: no view, and how to get one. */
function loggedOut(title) {
  generation++;
  unmount?.();
  unmount = null;
  clearInterval(statusTimer);
  window.removeEventListener("hashchange", show);
  document.getElementById("logout").hidden = true;
  const indicator = document.getElementById("server");
  indicator.className = "server down";
  indicator.textContent = "not signed in";
  root.replaceChildren(h("section", { class: "message" }, h("h1", {}, title), h("p", {}, withCode(HOW_TO_LOG_IN))));
}

async function start() {
  if (!(await token())) return loggedOut("This tab is not logged in");
  const logout = document.getElementById("logout");
  logout.hidden = false;
  logout.addEventListener("click", () => logOut().catch(() => null));
  onEnded((why) => loggedOut(why === "logout" ? "Logged out" : "This tab's session has ended"));
  window.addEventListener("hashchange", show);
  show();
  serverStatus();
  statusTimer = setInterval(serverStatus, 15000);
}

start();
