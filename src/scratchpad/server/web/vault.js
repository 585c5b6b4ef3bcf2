// The Vault page (#/vault): the saved connections by name (engine, name, field names, which
// pads get them; never a value: a stored secret shows as "•••• stored"), and add (an
// engine's form, probed before it is saved), edit (secrets left empty keep what is stored),
// test (the probe on the saved connection) and remove (after a confirmation). Above them, the
// forms a model asked for that wait for a person (their own link may have expired), each
// opened on its own page.

import { getJSON, postStream, request, sendJSON } from "./api.js";
import { BlockReader } from "./form/blocks.js";
import { h, useStyles } from "./dom.js";
import { ago } from "./format.js";
import { icon } from "./form/icons.js";
import { FormPanel } from "./form/panel.js";

useStyles(new URL("./vault.css", import.meta.url));

export const KEEP = "********"; // the vault's keep-sentinel: sent back, it keeps a secret
const SAVE_ACTIONS = [
  { id: "submit", label: "Save", kind: "primary" },
  { id: "cancel", label: "Cancel", kind: "secondary" },
];

function connectionPath(engine, name) {
  return `/v1/datasources/${encodeURIComponent(engine)}/${encodeURIComponent(name)}`;
}

/** Mount the page in `root`; the function that unmounts it. */
export function mount(root) {
  const view = new VaultView(root);
  view.load();
  return () => view.destroy();
}

/**
 * The form that edits a saved connection: its engine's fields (when the engine is known) and
 * its own, non-secret values filled in, secret ones empty ("leave empty to keep").
 */
export function editForm(record, engine) {
  const secret = new Set(record.secure_keys || []);
  const known = engine?.form?.fields || [];
  const names = [...known.map((f) => f.name), ...Object.keys(record.fields)];
  const fields = [...new Set(names)]
    .filter((name) => !name.startsWith("_"))
    .map((name) => {
      const base = known.find((f) => f.name === name) || { name, label: name, type: "text" };
      const field = { ...base, required: false, skipable: false };
      delete field.default;
      if (secret.has(name) || base.type === "password") {
        const stored = name in record.fields;
        return { ...field, type: field.type === "textarea" ? "textarea" : "password",
          placeholder: stored ? "•••• stored" : "", help: stored ? "Leave empty to keep the stored value." : field.help };
      }
      if (name in record.fields) field.default = record.fields[name];
      if (field.type === "select" && !(field.options || []).some((o) => o.value === field.default)) {
        field.type = "text";
        delete field.options;
      }
      return field;
    });
  return {
    form_id: `fm_edit_${Date.now().toString(16)}`,
    engine: record.engine,
    title: `Edit ${record.engine}/${record.name}`,
    subtitle: "Secret fields are empty: leave them empty to keep what is stored.",
    logo: engine?.logo || "key",
    fields,
    actions: SAVE_ACTIONS,
  };
}

/** The fields a save of the edit form sends: empty secrets as the keep-sentinel. */
export function editedFields(record, form, values) {
  const secret = new Set(record.secure_keys || []);
  const fields = {};
  for (const [name, value] of Object.entries(record.fields)) {
    if (name.startsWith("_")) fields[name] = secret.has(name) ? KEEP : value;
  }
  for (const field of form.fields) {
    const value = values[field.name] ?? "";
    const isSecret = secret.has(field.name) || field.type === "password";
    if (isSecret && value === "" && field.name in record.fields) fields[field.name] = KEEP;
    else if (value !== "" || field.name in record.fields) fields[field.name] = value;
  }
  const secureKeys = form.fields.filter((f) => f.type === "password").map((f) => f.name);
  return { fields, secure_keys: [...new Set([...secret, ...secureKeys])].filter((k) => k in fields) };
}

class VaultView {
  constructor(root) {
    this.alive = true;
    this.panel = null;
    this.engines = null;
    this.streams = new Set(); // AbortControllers of running tests
    this.message = h("p", { class: "vt-message", role: "status" });
    this.editor = h("div", { class: "vt-editor" });
    this.drawer = this.sidePanel();
    this.list = h("div", { class: "vt-list" });
    this.waiting = h("section", { class: "vt-waiting", "aria-label": "Forms waiting for you", hidden: true });
    const add = h("button", { type: "button", class: "vt-btn vt-btn-primary", "data-action": "add", onclick: () => this.chooseEngine() }, "Add connection");
    this.section = h(
      "section",
      { class: "vt-page" },
      h("header", { class: "vt-head" }, h("h1", {}, "Vault"), add),
      h("p", { class: "vt-intro" }, "Connections pads get as DS_* variables. Values never leave the server: secrets show as stored."),
      this.message,
      this.waiting,
      this.list,
      this.drawer,
    );
    root.replaceChildren(this.section);
  }

  /**
   * The side panel (a modal `<dialog>` at the right, full width when narrow) that holds the
   * engine picker and the form: Esc, the backdrop or the panel's × close it, but not while a
   * probe runs (closing would drop the typed values mid-test).
   */
  sidePanel() {
    const drawer = h("dialog", { class: "vt-drawer", "aria-label": "Connection" }, this.editor);
    drawer.addEventListener("cancel", (event) => {
      event.preventDefault();
      if (!this.panel?.busy) this.closePanel();
    });
    drawer.addEventListener("click", (event) => {
      if (event.target === drawer && !this.panel?.busy) this.closePanel();
    });
    return drawer;
  }

  destroy() {
    this.alive = false;
    this.closePanel();
    for (const controller of this.streams) controller.abort();
    this.section.remove();
  }

  say(text) {
    this.message.textContent = text || "";
  }

  async load() {
    try {
      this.forms();
      const [{ datasources }, granted] = await Promise.all([getJSON("/v1/datasources"), this.grants()]);
      if (this.alive) this.render(datasources, granted);
    } catch (error) {
      this.say(`The vault could not be read: ${error.message}`);
    }
  }

  /** "engine/name" → the pads that get it (every pad's grants in one request). */
  async grants() {
    const { pads } = await getJSON("/v1/grants");
    const granted = new Map();
    for (const answer of pads) {
      for (const { engine, name } of answer.connections) {
        const key = `${engine}/${name}`;
        granted.set(key, [...(granted.get(key) || []), answer.pad]);
      }
    }
    return granted;
  }

  /** The forms a model asked for that wait for a person, each with a way to open it. */
  async forms() {
    let forms = [];
    try {
      forms = (await getJSON("/v1/forms")).forms;
    } catch {
      forms = []; // an older server lists none
    }
    if (!this.alive) return;
    this.waiting.hidden = !forms.length;
    const row = (form) =>
      h("li", { class: "vt-form", "data-form": form.form_id },
        h("span", { class: "vt-form-title" }, form.title),
        h("span", { class: "vt-form-when" }, `asked ${ago(form.created_at)}`),
        h("a", { class: "vt-btn vt-btn-primary", href: `/connect/${encodeURIComponent(form.form_id)}` }, "Open"));
    const count = forms.length === 1 ? "A form waits" : `${forms.length} forms wait`;
    this.waiting.replaceChildren(
      h("h2", {}, `${count} for you`),
      h("p", { class: "vt-intro" }, "An agent asked for these credentials. Open one to fill it in; it is tested before it is saved."),
      h("ul", { class: "vt-forms" }, forms.map(row)),
    );
  }

  render(datasources, granted) {
    if (!datasources.length) {
      this.list.replaceChildren(h("p", { class: "vt-empty" }, "No connections yet. Add one, or ask the agent to connect a service."));
      return;
    }
    this.list.replaceChildren(...datasources.map((entry) => this.card(entry, granted.get(`${entry.engine}/${entry.name}`) || [])));
  }

  card(entry, pads) {
    const status = h("div", { class: "vt-status", "aria-live": "polite" });
    const secret = new Set(entry.secure_keys || []);
    const fields = (entry.fields || []).filter((name) => !name.startsWith("_")).map((name) =>
      h("li", { class: "vt-field" }, h("code", {}, name), secret.has(name) ? h("span", { class: "vt-secret" }, "•••• stored") : null),
    );
    const actions = h(
      "div",
      { class: "vt-actions" },
      h("button", { type: "button", class: "vt-btn", "data-action": "test", onclick: () => this.test(entry, status) }, "Test"),
      h("button", { type: "button", class: "vt-btn", "data-action": "edit", onclick: () => this.edit(entry) }, "Edit"),
      h("button", { type: "button", class: "vt-btn vt-btn-danger", "data-action": "remove", onclick: () => this.confirmRemove(entry, status) }, "Remove"),
    );
    return h(
      "article",
      { class: "vt-card", "data-connection": `${entry.engine}/${entry.name}` },
      h("header", { class: "vt-card-head" }, h("span", { class: "vt-engine" }, entry.engine), h("strong", { class: "vt-name" }, entry.name), actions),
      entry.error ? h("p", { class: "vt-error" }, entry.error) : null,
      h("ul", { class: "vt-fields" }, fields),
      h("p", { class: "vt-pads" }, pads.length ? `Pads: ${pads.join(", ")}` : "No pad gets it now."),
      entry.env?.length ? h("p", { class: "vt-env" }, entry.env.map((name) => h("code", {}, name))) : null,
      status,
    );
  }

  // --- add and edit: a FormPanel in the side panel ----------------------------------------

  closePanel() {
    this.panel?.destroy();
    this.panel = null;
    this.editor.replaceChildren();
    if (this.drawer.open) this.drawer.close();
  }

  /** Show `children` in the side panel (opening it when closed), in place of the last. */
  showInDrawer(...children) {
    this.panel?.destroy();
    this.panel = null;
    this.editor.replaceChildren(...children);
    if (!this.drawer.open) this.drawer.showModal();
  }

  openPanel(spec, options = {}) {
    this.showInDrawer();
    this.panel = new FormPanel(this.editor, {
      onClose: () => this.closePanel(),
      onAction: (id) => {
        if (id !== "view_connections") return false;
        this.closePanel();
        return true;
      },
      ...options,
    });
    this.panel.setForm(spec);
  }

  async chooseEngine() {
    try {
      this.engines ||= (await getJSON("/v1/datasources/engines")).engines;
    } catch (error) {
      return this.say(`The engines could not be listed: ${error.message}`);
    }
    const cards = this.engines.map((engine) =>
      h("button", { type: "button", class: "vt-engine-pick", "data-engine": engine.engine, onclick: () => this.add(engine) },
        h("span", { class: "vt-engine-icon" }, icon(engine.logo)), engine.label),
    );
    const close = h("button", { type: "button", class: "fp-close", "aria-label": "Close", onclick: () => this.closePanel() }, icon("close"));
    this.showInDrawer(
      h("div", { class: "vt-engines" },
        h("header", { class: "vt-engines-head" }, h("h2", {}, "Add a connection"), close),
        h("p", {}, "Which kind of connection? Its form is tested by a probe before it is saved."),
        h("div", { class: "vt-engine-list" }, cards)),
    );
  }

  add(engine) {
    this.openPanel(engine.form, {
      onDone: (status) => {
        if (status === "success") this.load();
      },
    });
  }

  async edit(entry) {
    let record;
    try {
      record = await getJSON(connectionPath(entry.engine, entry.name));
      this.engines ||= (await getJSON("/v1/datasources/engines")).engines;
    } catch (error) {
      return this.say(`${entry.engine}/${entry.name} could not be read: ${error.message}`);
    }
    const engine = this.engines.find((e) => e.engine === record.engine);
    const spec = editForm(record, engine);
    this.openPanel(spec, {
      successTitle: "Saved",
      onSubmit: async (submission, panel) => {
        const body = { engine: record.engine, name: record.name, ...editedFields(record, spec, submission.values) };
        await sendJSON("/v1/datasources", body);
        panel.forget(spec.form_id);
        panel.applyPatch({ _is_success: true, form_error: null, subtitle: `${record.engine}/${record.name} is saved.`,
          actions: [{ id: "close", label: "Close", kind: "primary" }] });
        this.load();
      },
    });
  }

  // --- remove and test --------------------------------------------------------------------

  confirmRemove(entry, status) {
    const where = `${entry.engine}/${entry.name}`;
    const remove = async () => {
      try {
        await request(connectionPath(entry.engine, entry.name), { method: "DELETE" });
        this.say(`Removed ${where}.`);
        this.load();
      } catch (error) {
        status.replaceChildren(h("p", { class: "vt-error" }, error.message));
      }
    };
    status.replaceChildren(
      h("div", { class: "vt-confirm", role: "alertdialog", "aria-label": `Remove ${where}?` },
        h("span", {}, `Remove ${where}? Pads lose its variables; this cannot be undone.`),
        h("button", { type: "button", class: "vt-btn vt-btn-danger", "data-action": "confirm-remove", onclick: remove }, "Remove"),
        h("button", { type: "button", class: "vt-btn", "data-action": "keep", onclick: () => status.replaceChildren() }, "Keep")),
    );
  }

  async test(entry, status) {
    const line = h("p", { class: "vt-testing" }, h("span", { class: "fp-spinner" }), "Testing…");
    status.replaceChildren(line);
    const controller = new AbortController();
    this.streams.add(controller);
    const reader = new BlockReader();
    let outcome = null;
    const onEvent = ({ event, data }) => {
      if (event === "response.output_text.delta") {
        for (const { body } of reader.feed(String(data?.delta ?? "")).blocks) {
          if (body.status_text) line.lastChild.textContent = body.status_text;
        }
      } else if (event === "response.completed" || event === "response.failed") {
        outcome = data?.response || {};
      }
    };
    try {
      await postStream(`${connectionPath(entry.engine, entry.name)}/test`, {}, onEvent, controller.signal);
    } catch (error) {
      outcome = { status: "failed", error: { message: error.message } };
    } finally {
      this.streams.delete(controller);
    }
    if (!this.alive) return;
    const ok = outcome?.status === "success";
    const text = outcome?.output_text || outcome?.error?.message || "The test ended without a verdict.";
    status.replaceChildren(h("p", { class: `vt-outcome ${ok ? "vt-ok" : "vt-failed"}`, "data-status": outcome?.status || "failed" }, ok ? "✓ " : "✗ ", text));
  }
}
