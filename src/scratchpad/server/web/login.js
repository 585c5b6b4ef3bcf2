// The page a one-time login link opens (/login?token=…): the token is traded for this tab's
// session (POST /login), kept in this tab (session.js), and the page goes on to where the link
// leads. The token leaves the address bar and the history at once: it is used up either way.

import { ApiError, redeem } from "./api.js";
import { h, withCode } from "./dom.js";
import { HOW_TO_LOG_IN, keep } from "./session.js";

/** A path on this server (no `//host`, which a browser reads as another site). */
export function isLocalPath(path) {
  return typeof path === "string" && path.startsWith("/") && !path.startsWith("//") && !path.startsWith("/\\");
}

async function logIn(main, token) {
  try {
    const found = await redeem(token);
    keep(found.scope, found.session);
    location.replace(isLocalPath(found.next) ? found.next : "/");
  } catch (error) {
    const why = error instanceof ApiError ? error.message : "The server could not be reached.";
    main.replaceChildren(h("h1", {}, "This login link no longer works"), h("p", {}, withCode(why)), h("p", {}, withCode(HOW_TO_LOG_IN)));
  }
}

const main = document.querySelector("main");
if (main) {
  const token = new URLSearchParams(location.search).get("token") || "";
  history.replaceState(null, "", "/login");
  logIn(main, token);
}
