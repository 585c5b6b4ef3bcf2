// What a cell shows below its code: long text (head + tail, the rest read in slices on
// demand), rich outputs (images as data: URLs, HTML only inside a sandboxed iframe), errors
// with the traceback folded. Text always goes in as textContent.

import { getJSON, padPath } from "./api.js";
import { h } from "./dom.js";

export const KEEP = 4096; // characters of head and of tail shown of a long text
const SLICE = 256 * 1024; // characters read per request by "show all"

/**
 * A <pre> of `text`; past 2 × KEEP characters only its head and tail with a "show all"
 * button that reads the whole field of the stored cell in slices.
 */
export function longText(pad, cellId, field, text, className) {
  const pre = h("pre", { class: className });
  if (text.length <= 2 * KEEP) {
    pre.textContent = text;
    return pre;
  }
  const hidden = text.length - 2 * KEEP;
  const more = h(
    "button",
    { type: "button", class: "link show-all" },
    `… ${hidden.toLocaleString()} more characters — show all`,
  );
  more.addEventListener("click", () => showAll(pre, more, pad, cellId, field, text));
  pre.append(text.slice(0, KEEP), h("span", { class: "cut" }, "\n", more, "\n"), text.slice(-KEEP));
  return pre;
}

async function showAll(pre, button, pad, cellId, field, known) {
  button.disabled = true;
  button.textContent = "loading…";
  const whole = document.createTextNode("");
  try {
    let offset = 0;
    for (;;) {
      const url = `${padPath(pad)}/cells/${encodeURIComponent(cellId)}/text?field=${field}&offset=${offset}&length=${SLICE}`;
      const slice = await getJSON(url);
      if (offset === 0) pre.replaceChildren(whole);
      whole.appendData(slice.text);
      offset += slice.text.length;
      if (!slice.text.length || offset >= slice.total) break;
    }
  } catch (error) {
    if (error.status === 404 && !whole.length) {
      pre.replaceChildren(known); // the server cannot read slices: what this page holds
      return;
    }
    button.disabled = false;
    button.textContent = `could not load the rest (${error.message}) — try again`;
  }
}

/** The last non-empty line of a traceback shown, the rest folded in <details>. */
export function errorBlock(pad, cellId, text) {
  const lines = text.replace(/\s+$/, "").split("\n");
  const last = lines[lines.length - 1] || "error";
  const box = h("div", { class: "error", role: "group", "aria-label": "error" });
  box.append(h("pre", { class: "error-line" }, last));
  if (lines.length > 1) {
    const body = longText(pad, cellId, "error", text, "traceback");
    box.append(h("details", {}, h("summary", {}, `Traceback (${lines.length} lines)`), body));
  }
  return box;
}

const IMAGES = ["image/png", "image/jpeg", "image/gif", "image/webp"];

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
  for (const mime of ["text/markdown", "text/latex"]) {
    if (typeof bundle[mime] === "string") return h("pre", { class: "output-text" }, bundle[mime]);
  }
  if (bundle["application/json"] !== undefined) {
    return h("pre", { class: "output-text" }, JSON.stringify(bundle["application/json"], null, 2));
  }
  return h("pre", { class: "output-text" }, plain);
}

/** HTML from a cell: only inside an iframe sandboxed of everything (no scripts, no origin). */
function htmlFrame(html) {
  const frame = h("iframe", { class: "output-html", sandbox: "", title: "HTML output" });
  frame.setAttribute("srcdoc", html);
  const rows = (html.match(/<(tr|br|p|li|h\d|div)\b/gi) || []).length;
  frame.style.height = `${Math.min(480, Math.max(48, 28 + rows * 24))}px`;
  return frame;
}
