// The one way the web UI talks to the server: same-origin requests carrying the session
// cookie, errors as `ApiError` with the server's own message ({"error": ..., "type": ...}),
// and server-sent events read from a POST (fetch) or a GET (EventSource).

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

/** Any request; resolves to the Response when it is 2xx, else throws ApiError. */
export async function request(url, options = {}) {
  const response = await fetch(url, { credentials: "same-origin", ...options });
  if (!response.ok) throw await failure(response);
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
 * Follow a GET event stream (EventSource: the browser reconnects by itself). `onEvent(data)`
 * gets each frame's parsed JSON; returns a function that closes the stream.
 */
export function follow(url, onEvent, onError) {
  const source = new EventSource(url, { withCredentials: true });
  source.onmessage = (message) => onEvent(parseMaybe(message.data));
  if (onError) source.onerror = onError;
  return () => source.close();
}

/** A pad name as one URL path segment ('/' in names travels as %2F). */
export function padPath(name) {
  return `/v1/pads/${encodeURIComponent(name)}`;
}
