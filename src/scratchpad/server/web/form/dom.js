// A small DOM builder for the web UI's forms: text always goes in as text (never parsed as
// HTML) and no element gets a `style` attribute (the page's CSP allows styles from files
// only; code that must set one uses `el.style` after building).

/**
 * `h("button", {class: "x", onclick: fn, disabled: true}, "Save")`: attributes by name
 * (`false`/`null` leave one out, `true` sets it empty), `on…` functions as listeners,
 * children as nodes or text.
 */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "style") throw new Error("no style attributes: use classes (CSP)");
    if (name.startsWith("on") && typeof value === "function") {
      element.addEventListener(name.slice(2), value);
    } else element.setAttribute(name, value === true ? "" : String(value));
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Whether `text` is an http(s) link (anything else is never made a link). */
export function isWebLink(text) {
  try {
    const url = new URL(String(text));
    return url.protocol === "https:" || url.protocol === "http:";
  } catch {
    return false;
  }
}

/** A link that opens elsewhere, or nothing when `url` is not an http(s) link. */
export function outLink(url, text, className) {
  if (!isWebLink(url)) return null;
  return h("a", { href: url, target: "_blank", rel: "noopener noreferrer", class: className }, text);
}

/**
 * Load a stylesheet once (a `<link>`: the CSP allows files, not inline styles). Pass it
 * resolved against the caller: `useStyles(new URL("./x.css", import.meta.url))`.
 */
export function useStyles(href) {
  const url = new URL(href, document.baseURI).pathname;
  if (document.querySelector(`link[rel="stylesheet"][href="${url}"]`)) return;
  document.head.append(h("link", { rel: "stylesheet", href: url }));
}
