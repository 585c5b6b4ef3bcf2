// A pad's status as words and a colour: idle, busy (with the time it has been busy), asleep
// (no kernel until its next use), stopped, dead (with its cause). Works with the older list
// entries too (no busy_since, no cause); a status it does not know shows as its word.

import { h } from "./dom.js";
import { duration, since } from "./format.js";

export function statusText(info) {
  const status = info.status || "unknown";
  if (status === "busy" && info.busy_since) return `busy · ${duration(Math.floor(since(info.busy_since)))}`;
  if (status === "dead" && info.cause) return `dead: ${info.cause}`;
  if (status === "busy" && info.queued) return `busy · ${info.queued} queued`;
  return String(status);
}

/** The colour class of a status: `status-<word>` for the known ones, else `status-unknown`. */
export function statusClass(info) {
  const status = info.status || "unknown";
  return KNOWN.has(status) ? `status-${status}` : "status-unknown";
}

const KNOWN = new Set(["idle", "busy", "asleep", "stopped", "dead", "new", "removed"]);

export function statusChip(info) {
  return h("span", { class: `chip ${statusClass(info)}` }, statusText(info));
}

/** The header of a pad's pages: its name, its status, tabs (Notebook · Files), actions. */
export function padHeader(name, active, actions = []) {
  const chip = h("span", { class: "chip", role: "status", "aria-live": "polite", hidden: true });
  const tab = (label, href, key) =>
    h("a", { href, class: key === active ? "tab active" : "tab", "aria-current": key === active ? "page" : null }, label);
  const base = `#/pads/${encodeURIComponent(name)}`;
  const element = h(
    "header",
    { class: "pad-header" },
    h("div", { class: "pad-title" }, h("h1", {}, name), chip),
    h("nav", { class: "tabs", "aria-label": "pad" }, tab("Notebook", base, "notebook"), tab("Files", `${base}/files`, "files")),
    h("div", { class: "pad-actions" }, actions),
  );
  let info = null;
  const show = () => {
    if (!info) return;
    chip.className = `chip ${statusClass(info)}`;
    chip.textContent = statusText(info);
  };
  const timer = setInterval(show, 1000);
  return {
    element,
    setInfo(next) {
      info = next;
      chip.hidden = !next;
      show();
    },
    destroy: () => clearInterval(timer),
  };
}
