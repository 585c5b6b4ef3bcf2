// The web UI's one set of DOM helpers: every text goes in as textContent, never as HTML, and
// no element gets a `style` attribute (the CSP allows styles from files only; code that must
// set one uses `el.style` after building).

/**
 * An element: `h("button", {class: "x", onclick: fn, "aria-label": "y"}, "text", child)`.
 * Attributes starting with "on" become listeners; `null`/`false` attributes are skipped,
 * `true` sets one empty; strings among the children become text nodes.
 */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "style") throw new Error("no style attributes: use classes (CSP)");
    if (key.startsWith("on") && typeof value === "function") {
      element.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      element.className = value;
    } else if (key in element && typeof value !== "string") {
      element[key] = value;
    } else {
      element.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace every child of `element`. */
export function replace(element, ...children) {
  element.replaceChildren();
  append(element, children);
}

/**
 * Ask a yes/no question in a modal dialog; resolves true when confirmed. Leaving the page it
 * was asked on (Back, a link) answers no: a question never outlives its page.
 */
export function confirmDialog(title, message, action = "OK") {
  return new Promise((resolve) => {
    const done = (answer) => {
      window.removeEventListener("hashchange", left);
      dialog.close();
      dialog.remove();
      resolve(answer);
    };
    const left = () => done(false);
    window.addEventListener("hashchange", left);
    const dialog = h(
      "dialog",
      { class: "confirm", "aria-labelledby": "confirm-title" },
      h("h2", { id: "confirm-title" }, title),
      h("p", {}, message),
      h(
        "div",
        { class: "actions" },
        h("button", { type: "button", onclick: () => done(false) }, "Cancel"),
        h("button", { type: "button", class: "danger", onclick: () => done(true) }, action),
      ),
    );
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault();
      done(false);
    });
    document.body.append(dialog);
    dialog.showModal();
    dialog.querySelector("button").focus();
  });
}

/** Text whose `backquoted` parts are code: text nodes and `<code>` elements, for `h`. */
export function withCode(text) {
  return String(text)
    .split("`")
    .map((part, i) => (i % 2 ? h("code", {}, part) : part));
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
