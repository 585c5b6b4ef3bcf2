// The one way the web UI talks to the server: same-origin requests carrying this tab's session
// in the X-Scratchpad-Session header (session.js; never a cookie), errors as `ApiError` with
// the server's own message ({"error": ..., "type": ...}), server-sent events read from a POST
// or a GET, and short-lived signed URLs for what the browser fetches without script
// (downloads, images), which cannot carry the header.

import * as session from "./session.js";

const RETRY_MS = 1000; // a followed stream that broke opens again after this (doubling)
const MAX_RETRY_MS = 15000;

export class ApiError extends Error {
  constructor(status, message, type) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

async function failure(response) {
  let message = `${response.status} ${response.statusText}`;
  let type = "HTTPError";
  try {
    const body = await response.json();
    if (body && typeof body.error === "string") {
      message = body.error;
      type = body.type || type;
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(response.status, message, type);
}

/**
 * Any request, with this tab's session (unless `anonymous`); resolves to the Response when it
 * is 2xx, else throws ApiError.
 */
export async function request(url, options = {}) {
  const { anonymous = false, ...rest } = options;
  const token = anonymous ? null : await session.token();
  const headers = new Headers(rest.headers || {});
  if (token) headers.set(session.HEADER, token);
  const response = await fetch(url, { ...rest, headers, credentials: "omit" });
  if (!response.ok) {
    if (response.status === 401 && token) session.lost(token);
    throw await failure(response);
  }
  return response;
}

export async function getJSON(url, options = {}) {
  return (await request(url, options)).json();
}

/** A JSON body sent with `method` (POST by default); the JSON answer. */
export async function sendJSON(url, body, method = "POST", options = {}) {
  const response = await request(url, {
    method,
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    ...options,
  });
  return response.json();
}

/**
 * POST `body` and read the answer as server-sent events: `onEvent({event, data, id})` for
 * each one (`data` parsed as JSON when it is JSON). Resolves when the stream ends; `signal`
 * (an AbortSignal) stops reading.
 */
export async function postStream(url, body, onEvent, signal) {
  const response = await request(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify(body),
    signal,
  });
  await readEvents(response, onEvent);
}

async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  const parser = sseParser(onEvent);
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    parser(value);
  }
  parser("\n\n");
}

/** A parser fed chunks of SSE text; calls `onEvent` per complete event. */
export function sseParser(onEvent) {
  let buffer = "";
  return (chunk) => {
    buffer += chunk.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { event: "message", data: "", id: null };
      const data = [];
      for (const line of block.split("\n")) {
        if (!line || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "data") data.push(value);
        else if (field === "event") event.event = value;
        else if (field === "id") event.id = value;
      }
      if (!data.length) continue;
      event.data = parseMaybe(data.join("\n"));
      onEvent(event);
    }
  };
}

function parseMaybe(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * Follow a GET event stream: `onEvent(data)` gets each frame's parsed JSON. A stream that ends
 * or breaks opens again after a pause, as EventSource would (which cannot send the session
 * header): `onError({error, closed})` hears of each end or failure, `closed` when the server
 * refused the stream (then it stays closed). Returns a function that closes the stream.
 */
export function follow(url, onEvent, onError) {
  const controller = new AbortController();
  const { signal } = controller;
  const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  (async () => {
    let wait = RETRY_MS;
    while (!signal.aborted) {
      try {
        const response = await request(url, { headers: { accept: "text/event-stream" }, signal });
        wait = RETRY_MS;
        await readEvents(response, (event) => onEvent(event.data));
        if (!signal.aborted) onError?.({ error: null, closed: false });
      } catch (error) {
        if (signal.aborted) return;
        const closed = error instanceof ApiError;
        onError?.({ error, closed });
        if (closed) return;
        wait = Math.min(wait * 2, MAX_RETRY_MS);
      }
      await pause(wait);
    }
  })();
  return () => controller.abort();
}

/**
 * A short-lived URL for a GET the browser makes without script (a download, an image): it is
 * signed for this tab's session, as a link cannot carry the session's header.
 */
export async function signedUrl(path) {
  return (await sendJSON("/v1/signed-urls", { url: path })).url;
}

/**
 * Download `path` through a signed URL (the server's attachment header makes it a download);
 * `filename`: the link's `download` attribute, for answers without a sandboxing CSP.
 */
export async function download(path, filename = null) {
  const link = document.createElement("a");
  link.href = await signedUrl(path);
  if (filename !== null) link.download = filename;
  link.click();
}

/** Trade a login link's token for this tab's session: {session, scope, next, expires_at}. */
export async function redeem(token) {
  return sendJSON("/login", { token }, "POST", { anonymous: true });
}

/** Log out this tab's login (every tab and link of it) and forget it here. */
export async function logOut() {
  try {
    await request("/logout", { method: "POST" });
  } finally {
    session.end();
  }
}

/** A pad name as one URL path segment ('/' in names travels as %2F). */
export function padPath(name) {
  return `/v1/pads/${encodeURIComponent(name)}`;
}
