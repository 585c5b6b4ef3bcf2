// One field of a credential form: label, skip toggle, input of its type, and its message
// slots (error, warning, status; help when none of them is set). Values live in the panel's
// memory and are put into inputs as properties, never as attributes or text.

import { h } from "../dom.js";

const SECRET_TYPES = new Set(["password", "textarea"]);
const SECRET_NAME = /password|passphrase|secret|token|key|credential|auth/i;

/** Whether a field's value is a secret (as the server's `is_secret_field` decides). */
export function isSecretField(field) {
  return SECRET_TYPES.has(field.type) || SECRET_NAME.test(String(field.name || ""));
}

/** The value a field starts with: its default, as text ("true"/"false" for a boolean). */
export function initialValue(field) {
  if (field.type === "boolean") return field.default === true ? "true" : "false";
  return typeof field.default === "string" ? field.default : "";
}

/**
 * The element of `field`. `entry` is {value, skipped}; `onInput(value)` and `onSkip()` report
 * what the person does; `busy` disables everything (the layout stays the same).
 */
export function renderField(field, entry, { id, busy, onInput, onSkip }) {
  const skipable = field.skipable !== false;
  const skipped = skipable && entry.skipped;
  const messages = fieldMessages(field, `${id}-msg`);
  const [element, control] = input(field, entry.value, { id, disabled: busy || skipped, onInput });
  if (field.error) control.setAttribute("aria-invalid", "true");
  control.setAttribute("aria-describedby", `${id}-msg`);
  const label = h(
    "label",
    { for: id, class: "fp-label" },
    field.label || field.name,
    field.required ? h("span", { class: "fp-required", "aria-hidden": "true" }, " *") : null,
  );
  const skip = skipable
    ? h(
        "button",
        { type: "button", class: "fp-skip", disabled: busy, onclick: onSkip },
        skipped ? "unskip" : "skip",
      )
    : null;
  const classes = ["fp-field", skipped && "fp-skipped", field.error && "fp-has-error"];
  return h(
    "div",
    { class: classes.filter(Boolean).join(" "), "data-field": field.name },
    h("div", { class: "fp-label-row" }, label, skip),
    element,
    messages,
  );
}

function fieldMessages(field, id) {
  const slots = [
    field.error ? h("p", { class: "fp-msg fp-msg-error" }, field.error) : null,
    field.warning ? h("p", { class: "fp-msg fp-msg-warning" }, field.warning) : null,
    field.status
      ? h("p", { class: "fp-msg fp-msg-status" }, h("span", { class: "fp-spinner" }), field.status)
      : null,
  ].filter(Boolean);
  if (!slots.length && field.help) slots.push(h("p", { class: "fp-msg fp-msg-help" }, field.help));
  return h("div", { class: "fp-msgs", id, "aria-live": "polite" }, slots);
}

/** [the element to show, the control itself] of a field's type. */
function input(field, value, { id, disabled, onInput }) {
  const common = { id, name: field.name, disabled, spellcheck: "false" };
  let element;
  if (field.type === "boolean") return checkbox(field, value, common, onInput);
  if (field.type === "select") element = select(field, common);
  else if (field.type === "textarea") {
    element = h("textarea", { ...common, rows: 4, autocomplete: "off", class: "fp-input fp-mono" });
  } else {
    const type = { password: "password", url: "url" }[field.type] || "text";
    const autocomplete = type === "password" ? "new-password" : "off";
    const mono = type === "password" ? " fp-mono" : "";
    element = h("input", { ...common, type, autocomplete, class: `fp-input${mono}` });
  }
  if (field.placeholder && field.type !== "select") element.placeholder = field.placeholder;
  element.value = value;
  element.addEventListener("input", () => onInput(element.value));
  element.addEventListener("change", () => onInput(element.value));
  return [element, element];
}

function select(field, common) {
  const options = (field.options || []).map((option) =>
    h("option", { value: option.value }, option.label ?? option.value),
  );
  const placeholder = typeof field.default === "string" ? null : h("option", { value: "" }, "Choose…");
  return h("select", { ...common, class: "fp-input" }, placeholder, options);
}

function checkbox(field, value, common, onInput) {
  const box = h("input", { ...common, type: "checkbox", class: "fp-checkbox" });
  box.checked = value === "true";
  box.addEventListener("change", () => onInput(box.checked ? "true" : "false"));
  const text = field.checkbox_label || field.label || field.name;
  const wrapper = h("span", { class: "fp-check" }, box, h("span", { class: "fp-check-label" }, text));
  return [wrapper, box];
}
