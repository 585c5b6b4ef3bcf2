// /connect/{form_id}: a credential form a model asked for, on a page of its own. The form
// comes from GET /v1/forms/{form_id} (its spec and whether it is still open); the person
// fills it in and submits it to the probe; on success the agent is told by the server. A
// browser session opened by the form's link may reach this form only, so nothing here leads
// elsewhere in the app (no "View connections"). That session is kept for this form beside the
// tab's full one (session.js); without it the page uses the full one, if this browser has it.

import { ApiError, getJSON } from "./api.js";
import { h } from "./dom.js";
import { FormPanel } from "./form/panel.js";
import { forForm, token } from "./session.js";

export const DONE = "You can close this tab; the agent has been told.";
const OUT_OF_REACH = ["view_connections"]; // the rest of the app: 403 for a one-form session
const ENDED = {
  completed: ["This form is done", DONE],
  declined: ["This form was declined", "Ask the agent again if you want to connect."],
  expired: ["This form has expired", "Ask the agent for a new one."],
};

/** The form id of this page's path (`/connect/<id>`). */
export function formIdOf(path) {
  const last = path.replace(/\/+$/, "").split("/").pop() || "";
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

function notice(root, title, text, ...more) {
  root.replaceChildren(
    h("section", { class: "cn-notice", role: "status" }, h("h1", {}, title), h("p", {}, text), more),
  );
}

function connectionLine(connection) {
  if (!connection || typeof connection !== "object") return null;
  const variables = Array.isArray(connection.variables) ? connection.variables.join(", ") : "";
  const where = `${connection.engine}/${connection.name}`;
  return h("p", { class: "cn-connection" }, `Saved as ${where}`, variables ? `; pads get ${variables}.` : ".");
}

export async function open(root, formId) {
  forForm(formId);
  if (!(await token())) {
    return notice(root, "This form needs its link", "Open the link the agent gave you for it in this tab (a link works once, for 10 minutes); if it was used already, ask the agent for the form again.");
  }
  let form;
  try {
    form = await getJSON(`/v1/forms/${encodeURIComponent(formId)}`);
  } catch (error) {
    const why = error instanceof ApiError ? error.message : "The server could not be reached.";
    return notice(root, "This form could not be opened", why);
  }
  document.title = `${form.spec?.title || "Connect"} · Scratchpad`;
  if (form.status !== "open") {
    const [title, text] = ENDED[form.status] || ["This form is closed", ""];
    return notice(root, title, text, connectionLine(form.connection));
  }
  show(root, { ...form.spec, form_id: form.spec?.form_id || form.form_id || formId });
}

function show(root, spec) {
  root.replaceChildren();
  let saved = null; // the connection, once the probe succeeded
  const panel = new FormPanel(root, {
    hiddenActions: OUT_OF_REACH,
    onDone(status, response) {
      if (status !== "success") return;
      saved = response.connection || {};
      root.append(h("div", { class: "cn-after" }, h("p", { class: "cn-done", role: "status" }, DONE)));
    },
    onClose() {
      panel.destroy();
      if (saved) return notice(root, "Connected", DONE, connectionLine(saved));
      const reopen = h("button", { type: "button", class: "cn-reopen", onclick: () => show(root, spec) }, "Show the form again");
      notice(root, "The form is closed", "Nothing was sent.", reopen);
    },
  });
  panel.setForm(spec);
}

const root = document.getElementById("connect");
if (root) open(root, formIdOf(window.location.pathname));
