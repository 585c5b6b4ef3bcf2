// The credential form panel: renders a form spec, keeps what the person types (in memory
// only, per form and method), submits it to the probe and follows the answer's stream,
// merging the patches it carries as they arrive. The states: a method picker (cards) or the
// chosen method's breadcrumb, the input grid, busy while probing (inputs disabled, nothing
// moves), success (a check and its actions), failure (a banner over the restored grid).

import { ApiError, postStream } from "../api.js";
import { BlockReader, FORM_BLOCK } from "./blocks.js";
import { h, outLink, useStyles } from "../dom.js";
import { initialValue, renderField } from "./fields.js";
import { icon } from "./icons.js";
import { clone, mergePatch } from "./patch.js";

useStyles(new URL("./form.css", import.meta.url));

export const SUBMIT_URL = "/v1/datavault/submissions";
const DEFAULT_ACTIONS = [
  { id: "submit", label: "Connect", kind: "primary" },
  { id: "cancel", label: "Cancel", kind: "secondary" },
];
const SUCCESS_ACTIONS = [
  { id: "close", label: "Close", kind: "secondary" },
  { id: "view_connections", label: "View connections →", kind: "primary" },
];
const CLOSERS = new Set(["cancel", "close"]);
const NAME_FIELD = "connection_name"; // of a submission: what a success is saved as
const MAX_PROSE = 4000;
const MAX_STEPS = 8;
let panels = 0;

function isObject(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** The method a form is on: `auth_method`, else `selected_method`, else its only one. */
export function chosenMethod(form) {
  const methods = (form.methods || []).filter(isObject);
  for (const key of ["auth_method", "selected_method"]) {
    const found = methods.find((method) => form[key] != null && method.id === form[key]);
    if (found) return found;
  }
  return methods.length === 1 ? methods[0] : null;
}

/** The fields that apply: the shared ones (scope "") then the method's (scope: its id). */
export function fieldsOf(form, method = chosenMethod(form)) {
  const shared = (form.fields || []).map((field) => ({ field, scope: "" }));
  const own = method ? (method.fields || []).map((field) => ({ field, scope: method.id })) : [];
  return [...shared, ...own].filter(({ field }) => isObject(field) && field.name);
}

function describe(error) {
  if (error instanceof ApiError) return error.message;
  return "The server could not be reached; check that it runs, then submit again.";
}

export class FormPanel {
  /**
   * A panel appended to `container`. Options: `onSubmit(submission, panel)` replaces the
   * probe (a promise; what it throws shows as the form's error); `onDone(status, response,
   * panel)` after a probe's verdict; `onAction(id, panel)` (true: handled); `onClose()`;
   * `successTitle` (default "Connected"); `submitUrl`; `hiddenActions` (ids never shown,
   * e.g. "view_connections" where the rest of the app is out of reach). A panel that submits
   * to the probe (no `onSubmit`) asks for an optional connection name as well.
   */
  constructor(container, options = {}) {
    this.options = options;
    this.id = `fp${++panels}`;
    this.root = h("section", { class: "fp-panel", "aria-label": "Credential form" });
    container.append(this.root);
    this.form = null;
    this.typed = new Map(); // `${form_id}\n${scope}` -> Map(field name -> {value, skipped})
    this.names = new Map(); // form_id -> {value, skipped}: the connection's name, as typed
    this.dismissed = null; // the status text the person closed
    this.picking = false;
    this.sending = false;
    this.prose = "";
    this.steps = [];
    this.shownId = null;
    this.controller = null;
  }

  get busy() {
    return this.sending || this.form?._is_probing === true;
  }

  setForm(spec) {
    this.form = clone(spec);
    if (typeof this.form.form_id !== "string" || !this.form.form_id) {
      const hex = crypto.getRandomValues(new Uint8Array(5));
      this.form.form_id = "fm_" + [...hex].map((b) => b.toString(16).padStart(2, "0")).join("");
    }
    this.picking = false;
    this.render();
  }

  applyPatch(patch) {
    this.form = mergePatch(this.form || {}, patch);
    this.render();
  }

  /** Stop following a stream, drop every typed value and remove the panel. */
  destroy() {
    this.controller?.abort();
    this.typed.clear();
    this.root.remove();
  }

  close() {
    this.controller?.abort();
    if (this.options.onClose) this.options.onClose();
    else this.root.hidden = true;
  }

  entry(scope, field) {
    const key = `${this.form.form_id}\n${scope}`;
    if (!this.typed.has(key)) this.typed.set(key, new Map());
    const values = this.typed.get(key);
    if (!values.has(field.name)) values.set(field.name, { value: initialValue(field), skipped: false });
    return values.get(field.name);
  }

  /** Forget what was typed into form `formId` (every method of it). */
  forget(formId) {
    for (const key of [...this.typed.keys()]) {
      if (key.startsWith(`${formId}\n`)) this.typed.delete(key);
    }
  }

  // --- rendering ---------------------------------------------------------------------------

  render() {
    if (!this.form) return this.root.replaceChildren();
    const focused = this.root.contains(document.activeElement) ? document.activeElement.id : "";
    if (this.form.form_id !== this.shownId) {
      this.shownId = this.form.form_id; // a new form: the entrance plays again
      this.root.classList.remove("fp-enter");
      void this.root.offsetWidth;
      this.root.classList.add("fp-enter");
    }
    this.root.classList.toggle("fp-busy", this.busy);
    this.root.setAttribute("aria-busy", String(this.busy));
    const body = this.form._is_success ? this.success() : this.editing();
    this.root.replaceChildren(this.header(), ...[this.toast(), ...body].filter(Boolean));
    if (focused) document.getElementById(focused)?.focus();
  }

  header() {
    const form = this.form;
    const logo = h("span", { class: "fp-logo" }, icon(form.logo));
    if (form.logo_color) logo.style.color = form.logo_color;
    const close = h(
      "button",
      { type: "button", class: "fp-close", "aria-label": "Close", onclick: () => this.close() },
      icon("close"),
    );
    const subtitle = form.subtitle && !form._is_success ? form.subtitle : null;
    return h(
      "header",
      { class: "fp-header" },
      logo,
      h(
        "div",
        { class: "fp-heading" },
        h("h2", { class: "fp-title" }, form.title || "Credentials"),
        subtitle ? h("p", { class: "fp-subtitle" }, subtitle) : null,
        form._is_success ? null : outLink(form.help_url, "Where to find these →", "fp-help-link"),
      ),
      close,
    );
  }

  toast() {
    const text = this.form.status_text;
    if (!text || text === this.dismissed) return null;
    const dismiss = () => {
      this.dismissed = text;
      this.render();
    };
    return h(
      "div",
      { class: "fp-toast", role: "status" },
      this.busy ? h("span", { class: "fp-spinner" }) : null,
      h("span", { class: "fp-toast-text" }, text),
      h(
        "button",
        { type: "button", class: "fp-toast-close", "aria-label": "Dismiss", onclick: dismiss },
        "×",
      ),
    );
  }

  editing() {
    const form = this.form;
    const parts = [
      form.form_error ? h("div", { class: "fp-banner fp-banner-error", role: "alert" }, form.form_error) : null,
      form.form_warning ? h("div", { class: "fp-banner fp-banner-warning" }, form.form_warning) : null,
    ];
    const methods = (form.methods || []).filter(isObject);
    const method = chosenMethod(form);
    if (methods.length && (!method || this.picking)) {
      return [...parts, this.picker(methods, method), this.log()];
    }
    const grid = fieldsOf(form, method).map(({ field, scope }) => {
      const entry = this.entry(scope, field);
      const id = `${this.id}-${scope}-${field.name}`;
      const onInput = (value) => (entry.value = value);
      const onSkip = () => {
        entry.skipped = !entry.skipped;
        this.render();
        document.getElementById(`${id}-skip`)?.focus();
      };
      const element = renderField(field, entry, { id, busy: this.busy, onInput, onSkip });
      element.querySelector(".fp-skip")?.setAttribute("id", `${id}-skip`);
      return element;
    });
    const submit = (event) => {
      event.preventDefault();
      this.submit();
    };
    return [
      ...parts,
      method ? this.breadcrumb(method, methods.length > 1) : null,
      h(
        "form",
        { class: "fp-form", novalidate: true, onsubmit: submit },
        h("div", { class: "fp-grid" }, grid, this.nameField()),
        this.log(),
        this.actions(form.actions || DEFAULT_ACTIONS, false),
      ),
    ];
  }

  /** The connection's name (optional: the server picks the next number), when the panel
   * submits to the probe; null otherwise. */
  nameField() {
    if (this.options.onSubmit) return null;
    const formId = this.form.form_id;
    if (!this.names.has(formId)) this.names.set(formId, { value: "", skipped: false });
    const entry = this.names.get(formId);
    const field = {
      name: NAME_FIELD,
      label: "Connection name (optional)",
      type: "text",
      skipable: false,
      placeholder: "the next number",
      help: "Pads get its variables as DS_<ENGINE>_<NAME>__<FIELD>.",
    };
    const onInput = (value) => (entry.value = value);
    return renderField(field, entry, { id: `${this.id}-name`, busy: this.busy, onInput });
  }

  picker(methods, current) {
    const cards = methods.map((method) =>
      h(
        "div",
        { class: `fp-method${current && current.id === method.id ? " fp-method-current" : ""}` },
        h(
          "button",
          {
            type: "button",
            class: "fp-method-pick",
            "data-method": method.id,
            disabled: this.busy,
            onclick: () => this.pick(method.id),
          },
          h(
            "span",
            { class: "fp-method-label" },
            method.label || method.id,
            method.recommended ? h("span", { class: "fp-pill" }, "Recommended") : null,
          ),
          method.description ? h("span", { class: "fp-method-desc" }, method.description) : null,
        ),
        outLink(method.help_url, "How-to →", "fp-method-help"),
      ),
    );
    return h("div", { class: "fp-methods", "aria-label": "Choose how to connect" }, cards);
  }

  pick(methodId) {
    this.form = { ...this.form, selected_method: methodId, auth_method: methodId };
    this.picking = false;
    this.render();
  }

  breadcrumb(method, changeable) {
    const change = () => {
      this.picking = true;
      this.render();
    };
    return h(
      "div",
      { class: "fp-breadcrumb" },
      h("span", { class: "fp-crumb-key" }, "Method: "),
      h("strong", { class: "fp-crumb-method" }, method.label || method.id),
      changeable
        ? h("button", { type: "button", class: "fp-change", disabled: this.busy, onclick: change }, "change")
        : null,
    );
  }

  actions(list, success) {
    const hidden = new Set(this.options.hiddenActions || []);
    const buttons = list.filter((action) => !hidden.has(action.id)).map((action) => {
      const kind = action.kind || "secondary";
      const submits =
        !success && (action.id === "submit" || (kind === "primary" && !CLOSERS.has(action.id)));
      return h(
        "button",
        {
          type: submits ? "submit" : "button",
          class: `fp-btn fp-btn-${kind}`,
          "data-action": action.id,
          disabled: submits && this.busy,
          onclick: submits ? null : () => this.act(action.id),
        },
        action.label,
      );
    });
    return h("div", { class: "fp-actions" }, buttons);
  }

  act(id) {
    if (this.options.onAction?.(id, this) === true) return;
    if (CLOSERS.has(id)) this.close();
    else if (id === "view_connections") window.location.assign("/#/vault");
  }

  success() {
    const form = this.form;
    return [
      h(
        "div",
        { class: "fp-success", role: "status" },
        h("span", { class: "fp-success-check" }, icon("check")),
        h("p", { class: "fp-success-title" }, this.options.successTitle || "Connected"),
        form.subtitle ? h("p", { class: "fp-success-text" }, form.subtitle) : null,
      ),
      this.log(),
      this.actions(form.actions || SUCCESS_ACTIONS, true),
    ];
  }

  log() {
    const prose = this.prose.trim();
    if (!prose && !this.steps.length) return null;
    const steps = this.steps.map((step) => h("li", { class: `fp-step fp-step-${step.state}` }, step.text));
    return h(
      "div",
      { class: "fp-log", "aria-live": "polite" },
      steps.length ? h("ol", { class: "fp-steps" }, steps) : null,
      prose ? h("p", { class: "fp-prose" }, prose) : null,
    );
  }

  // --- submitting --------------------------------------------------------------------------

  /** What a submission sends: the values that apply, the skipped names, the form as shown. */
  collect() {
    const form = this.form;
    const method = chosenMethod(form);
    const values = {};
    const skipped = [];
    for (const { field, scope } of fieldsOf(form, method)) {
      const entry = this.entry(scope, field);
      if (field.skipable !== false && entry.skipped) skipped.push(field.name);
      else values[field.name] = entry.value;
    }
    const spec = method ? { ...form, auth_method: method.id, selected_method: method.id } : { ...form };
    const submission = { form_id: form.form_id, values, skipped, form_spec: spec };
    const name = this.options.onSubmit ? "" : (this.names.get(form.form_id)?.value || "").trim();
    if (name) submission[NAME_FIELD] = name;
    return submission;
  }

  async submit() {
    if (this.busy || !this.form || this.form._is_success) return;
    const submission = this.collect();
    this.sending = true;
    this.prose = "";
    this.steps = [];
    this.dismissed = null;
    this.render();
    try {
      if (this.options.onSubmit) await this.options.onSubmit(submission, this);
      else await this.probe(submission);
    } catch (error) {
      if (error?.name !== "AbortError") {
        this.form = mergePatch(this.form, { form_error: describe(error), status_text: null });
      }
    } finally {
      submission.values = {};
      this.sending = false;
      this.controller = null;
      if (this.form._is_probing) this.form = { ...this.form, _is_probing: false };
      this.render();
    }
  }

  /** Submit to the probe and follow its stream to the verdict. */
  async probe(submission) {
    const reader = new BlockReader();
    const formId = submission.form_id;
    let final = null;
    this.controller = new AbortController();
    const onEvent = ({ event, data }) => {
      const payload = isObject(data) ? data : {};
      if (event === "response.output_text.delta") this.take(reader.feed(String(payload.delta ?? "")));
      else if (event === "response.in_progress") this.thought(payload);
      else if (event === "response.completed" || event === "response.failed") {
        this.take(reader.end());
        final = { failed: event === "response.failed", response: payload.response || {} };
      }
      this.render();
    };
    await postStream(this.options.submitUrl || SUBMIT_URL, submission, onEvent, this.controller.signal);
    this.take(reader.end());
    this.verdict(final, formId);
  }

  take({ prose, blocks }) {
    for (const { kind, body } of blocks) {
      this.form = kind === FORM_BLOCK ? clone(body) : mergePatch(this.form, body);
    }
    if (prose) this.prose = (this.prose + prose).slice(-MAX_PROSE);
  }

  thought(payload) {
    const role = payload.thought_role;
    const thought = isObject(payload.thought) ? payload.thought : {};
    if (role === "scratchpad.start") {
      this.steps.push({ text: thought.description || "Running a check", state: "running" });
      this.steps = this.steps.slice(-MAX_STEPS);
    } else if (role === "scratchpad.end" && this.steps.length) {
      this.steps[this.steps.length - 1].state = thought.ok ? "ok" : "failed";
    }
  }

  verdict(final, formId) {
    const response = final?.response || {};
    let status = final ? response.status : "failed";
    if (!final) {
      this.form = mergePatch(this.form, {
        form_error: "The answer ended before the probe's verdict; submit again.",
      });
    } else if (final.failed) {
      status = "failed";
      const message = response.error?.message || "The connection could not be tested.";
      if (!this.form.form_error) this.form = mergePatch(this.form, { form_error: message });
    }
    if (status === "success") {
      this.forget(formId); // the typed secrets are not needed any more
      if (!this.form._is_success) this.form = mergePatch(this.form, { _is_success: true });
    }
    this.form = mergePatch(this.form, { status_text: null, _is_probing: false });
    this.options.onDone?.(status, response, this);
  }
}
