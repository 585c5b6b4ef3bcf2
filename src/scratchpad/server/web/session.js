// This tab's browser session. The token a login link gave this tab lives in sessionStorage,
// which is kept per origin (port included) and per tab: a program serving another port of
// this host (a pad's web app) never receives it, as it would a cookie, and it survives a
// reload of the tab. api.js sends it as the X-Scratchpad-Session header. A new tab of this
// origin (the API docs, a link opened in a new tab) asks the tabs already logged in for theirs
// over a BroadcastChannel, which is per origin too; with no such tab it needs a fresh login
// link. A form's link gives a session for that form only, kept beside the full one (never
// over it), so opening it leaves the rest of the UI logged in.

export const HEADER = "X-Scratchpad-Session";
export const HOW_TO_LOG_IN =
  "Open the login link that `scratchpad serve` printed when it started, or run `scratchpad login` for a new one (a link works once, for 10 minutes). A tab opened while another tab of this browser is logged in is logged in too.";
const FULL = "scratchpad.session";
const FORM = "scratchpad.form.";
const ASK_MS = 400; // how long a new tab waits for a logged-in tab to answer

const channel = typeof BroadcastChannel === "function" ? new BroadcastChannel(FULL) : null;
const listeners = new Set();
let full = read(FULL);
let form = null; // the form this page is for (the connect page), if any
let asking = null;

channel?.addEventListener("message", ({ data }) => {
  if (data?.type === "ask" && full) channel.postMessage({ type: "give", token: full });
  else if (data?.type === "ended" && data.token === full) drop(full, "logout");
});

function read(key) {
  try {
    return sessionStorage.getItem(key);
  } catch {
    return null; // storage refused (a sandboxed frame): no session
  }
}

function write(key, value) {
  try {
    if (value === null) sessionStorage.removeItem(key);
    else sessionStorage.setItem(key, value);
  } catch {
    // storage refused: the session lasts as long as this page
  }
}

/** Keep the session a login link gave (`scope`: "all" or "form:<id>"). */
export function keep(scope, token) {
  if (scope === "all") write(FULL, (full = token));
  else if (scope.startsWith("form:")) write(FORM + scope.slice(5), token);
}

/** This page is the form `formId`'s: its own session goes first. */
export function forForm(formId) {
  form = formId;
}

/**
 * The token this page sends: its form's session, else this tab's full session, else one a
 * logged-in tab of this origin hands over; null when there is none.
 */
export async function token() {
  const own = form === null ? null : read(FORM + form);
  if (own || full) return own || full;
  asking ||= ask();
  return asking;
}

function ask() {
  if (!channel) return Promise.resolve(null);
  return new Promise((resolve) => {
    const heard = ({ data }) => {
      if (data?.type === "give" && typeof data.token === "string") done(data.token);
    };
    const timer = setTimeout(() => done(null), ASK_MS);
    function done(found) {
      clearTimeout(timer);
      channel.removeEventListener("message", heard);
      if (found && !full) write(FULL, (full = found));
      asking = null;
      resolve(full);
    }
    channel.addEventListener("message", heard);
    channel.postMessage({ type: "ask" });
  });
}

/** The server no longer knows `token` (401): forget it here. */
export function lost(token) {
  drop(token, "ended");
}

/** This tab logged out: forget its session, here and in the tabs it was handed to. */
export function end() {
  const token = full;
  if (token) channel?.postMessage({ type: "ended", token });
  drop(token, "logout");
}

function drop(token, why) {
  const ownForm = form !== null && token !== null && read(FORM + form) === token;
  if (!token || (token !== full && !ownForm)) return;
  if (token === full) write(FULL, (full = null));
  if (ownForm) write(FORM + form, null);
  for (const listener of listeners) listener(why);
}

/** Call `listener(why)` when this page's session ends ("logout", or "ended" by the server). */
export function onEnded(listener) {
  listeners.add(listener);
}
