// The cell editor: a textarea where Shift-Enter runs, Tab / Shift-Tab indent and dedent, Enter
// keeps the line's indentation, and Escape lets the next Tab leave the editor (keyboard users
// are never trapped).

import { h } from "./dom.js";

const INDENT = "    ";

/** The editor's element; `onRun(code)` is called with the code on Shift-Enter or Run. */
export function cellEditor(onRun) {
  const area = h("textarea", {
    id: "cell-code",
    class: "code-input",
    rows: 6,
    spellcheck: false,
    autocapitalize: "off",
    autocomplete: "off",
    placeholder: "print('hello')",
    "aria-describedby": "cell-code-help",
  });
  let escaped = false;
  const run = () => {
    if (area.value.trim()) onRun(area.value);
  };
  area.addEventListener("keydown", (event) => {
    if (event.key === "Escape") {
      escaped = true;
      return;
    }
    if (event.key === "Enter" && (event.shiftKey || event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      run();
    } else if (event.key === "Tab" && !escaped) {
      event.preventDefault();
      indent(area, event.shiftKey);
    } else if (event.key === "Enter") {
      event.preventDefault();
      newline(area);
    }
    escaped = false;
  });
  const button = h("button", { type: "button", class: "primary", onclick: run }, "Run");
  const form = h(
    "div",
    { class: "editor" },
    h("label", { for: "cell-code" }, "New cell"),
    area,
    h(
      "div",
      { class: "editor-bar" },
      h("span", { id: "cell-code-help", class: "hint" }, "Shift-Enter runs · Tab indents · Esc then Tab leaves"),
      button,
    ),
  );
  return { element: form, area, button };
}

function edit(area, start, end, text, selectStart, selectEnd) {
  area.setRangeText(text, start, end);
  area.setSelectionRange(selectStart, selectEnd);
  area.dispatchEvent(new Event("input", { bubbles: true }));
}

function indent(area, outdent) {
  const { value, selectionStart: start, selectionEnd: end } = area;
  if (!outdent && start === end) {
    edit(area, start, end, INDENT, start + INDENT.length, start + INDENT.length);
    return;
  }
  const lineStart = value.lastIndexOf("\n", start - 1) + 1;
  const block = value.slice(lineStart, end);
  const lines = block.split("\n");
  const changed = lines.map((line) => (outdent ? line.replace(/^( {1,4}|\t)/, "") : INDENT + line));
  const text = changed.join("\n");
  const firstShift = changed[0].length - lines[0].length;
  const newStart = Math.max(lineStart, start + firstShift);
  edit(area, lineStart, end, text, start === end ? newStart : lineStart, lineStart + text.length);
}

function newline(area) {
  const { value, selectionStart: start, selectionEnd: end } = area;
  const lineStart = value.lastIndexOf("\n", start - 1) + 1;
  const line = value.slice(lineStart, start);
  let lead = line.match(/^[ \t]*/)[0];
  if (/:\s*$/.test(line)) lead += INDENT;
  const text = `\n${lead}`;
  edit(area, start, end, text, start + text.length, start + text.length);
}
