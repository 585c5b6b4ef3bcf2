// What a cell shows below its code: long text (head + tail, the rest read in slices on
// demand, folded again at will), rich outputs (images as data: URLs, HTML only inside a
// sandboxed iframe with a stylesheet of its own, markdown as DOM nodes), errors with the
// traceback folded. Text always goes in as textContent.

import { getJSON, padPath } from "./api.js";
import { h } from "./dom.js";
import { markdown } from "./markdown.js";

export const KEEP = 4096; // characters of head and of tail shown of a long text
const SLICE = 256 * 1024; // characters read per request by "show all"

/**
 * A <pre> of `text`; past 2 × KEEP characters only its head and tail with a "show all"
 * button that reads the whole field of the stored cell in slices ("show less" folds it again).
 * `span`: the text is the part of the field from code point `start` to `end` of a field of
 * `total` code points (a piece of stdout between two displays); "show all" reads that part.
 */
export function longText(pad, cellId, field, text, className, span = null) {
  const pre = h("pre", { class: className });
  if (text.length <= 2 * KEEP) {
    pre.textContent = text;
    return pre;
  }
  const hidden = text.length - 2 * KEEP;
  const more = h("button", { type: "button", class: "link show-all" }, `… ${hidden.toLocaleString()} more characters — show all`);
  const folded = [text.slice(0, KEEP), h("span", { class: "cut" }, "\n", more, "\n"), text.slice(-KEEP)];
  const fold = () => {
    pre.replaceChildren(...folded);
    pre.scrollTop = 0;
  };
  let whole = null; // the whole text once read
  const less = h("button", { type: "button", class: "link show-less", onclick: fold }, "show less");
  const unfold = () => pre.replaceChildren(h("span", { class: "cut fold" }, less, "\n"), whole);
  more.addEventListener("click", async () => {
    if (!whole) whole = await readAll(more, pad, cellId, field, text, span);
    if (whole) unfold();
  });
  fold();
  return pre;
}

/**
 * The whole field (or its `span`) as a text node, read in slices; null (the button says why)
 * on failure. Offsets count code points, as the server does.
 */
async function readAll(button, pad, cellId, field, known, span) {
  const label = button.textContent;
  button.disabled = true;
  button.textContent = "loading…";
  const whole = document.createTextNode("");
  try {
    let offset = span ? span.start : 0;
    for (;;) {
      const length = span ? Math.min(SLICE, span.end - offset) : SLICE;
      const url = `${padPath(pad)}/cells/${encodeURIComponent(cellId)}/text?field=${field}&offset=${offset}&length=${length}`;
      const slice = await getJSON(url);
      if (span && slice.total !== span.total) return document.createTextNode(known); // the page's copy was cut
      whole.appendData(slice.text);
      offset += slice.length;
      if (!slice.length || offset >= (span ? span.end : slice.total)) break;
    }
  } catch (error) {
    if (error.status === 404 && !whole.length) return document.createTextNode(known); // no slices here
    button.disabled = false;
    button.textContent = `could not load the rest (${error.message}) — try again`;
    return null;
  }
  button.disabled = false;
  button.textContent = label;
  return whole;
}

/**
 * An error, headed by the line that says what happened: a stopped cell's (timeout, cancel,
 * kill) first line says why it stopped; an error's last line names the exception. The whole
 * text is folded below.
 */
export function errorBlock(pad, cellId, text, status = "error") {
  const lines = text.replace(/\s+$/, "").split("\n");
  const stopped = status !== "error" && lines[0].trim();
  const head = (stopped ? lines[0] : lines[lines.length - 1]) || "error";
  const box = h("div", { class: "error", role: "group", "aria-label": "error" });
  box.append(h("pre", { class: "error-line" }, head));
  if (lines.length > 1) {
    const body = longText(pad, cellId, "error", text, "traceback");
    const what = stopped ? "Details" : "Traceback";
    box.append(h("details", {}, h("summary", {}, `${what} (${lines.length} lines)`), body));
  }
  return box;
}

const IMAGES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const RICH = [...IMAGES, "image/svg+xml", "text/html", "text/markdown", "text/latex", "application/json"];

/** Whether a mime bundle has a form richer than its text the page can show. */
export function isRich(bundle) {
  return Boolean(bundle) && RICH.some((mime) => bundle[mime] !== undefined && bundle[mime] !== null);
}

/** One mime bundle as an element, the richest kind the page can show safely. */
export function richOutput(bundle) {
  const plain = typeof bundle["text/plain"] === "string" ? bundle["text/plain"] : "";
  for (const mime of IMAGES) {
    if (typeof bundle[mime] === "string") {
      const src = `data:${mime};base64,${bundle[mime].replace(/\s+/g, "")}`;
      return h("img", { class: "output-image", src, alt: plain || "image output" });
    }
  }
  if (typeof bundle["image/svg+xml"] === "string") {
    const src = `data:image/svg+xml;charset=utf-8,${encodeURIComponent(bundle["image/svg+xml"])}`;
    return h("img", { class: "output-image", src, alt: plain || "SVG output" });
  }
  if (typeof bundle["text/html"] === "string") return htmlFrame(bundle["text/html"]);
  if (typeof bundle["text/markdown"] === "string") return h("div", { class: "output-markdown" }, markdown(bundle["text/markdown"]));
  if (typeof bundle["text/latex"] === "string") return h("pre", { class: "output-text" }, bundle["text/latex"]);
  if (bundle["application/json"] !== undefined) {
    return h("pre", { class: "output-text" }, JSON.stringify(bundle["application/json"], null, 2));
  }
  return h("pre", { class: "output-text" }, plain);
}

// The frame's own look: the page's CSP (inherited by a srcdoc frame) allows stylesheets from
// this server only, so a <style> in the cell's HTML does nothing; this one file does.
const FRAME_CSS = new URL("./frame.css", import.meta.url).pathname;

/** HTML from a cell: only inside an iframe sandboxed of everything (no scripts, no origin). */
function htmlFrame(html) {
  const frame = h("iframe", { class: "output-html", sandbox: "", title: "HTML output" });
  const head = `<!doctype html><html><head><meta charset="utf-8"><link rel="stylesheet" href="${FRAME_CSS}"></head><body>`;
  frame.setAttribute("srcdoc", `${head}${html}</body></html>`);
  const rows = (html.match(/<(tr|br|p|li|h\d|div)\b/gi) || []).length;
  frame.style.height = `${Math.min(480, Math.max(48, 36 + rows * 26))}px`;
  return frame;
}
