// The pads list (#/): every pad with its status (busy ones with the time they have been
// busy, dead ones with their cause), memory, last activity and cells; refreshed every few
// seconds; an asleep pad has a "Wake" button (starts its kernel); a name typed in "New pad"
// opens its (empty) notebook.

import { getJSON, sendJSON } from "./api.js";
import { h, replace } from "./dom.js";
import { ago, bytes } from "./format.js";
import { statusChip } from "./padstatus.js";

const REFRESH_MS = 3000;

export function mount(root) {
  const body = h("tbody", {});
  const notice = h("p", { class: "notice", role: "status", "aria-live": "polite", hidden: true });
  const empty = h("p", { class: "empty", hidden: true }, "No pads yet. Name one above to start, or let an agent create one.");
  const table = h(
    "table",
    { class: "pads" },
    h("caption", { class: "visually-hidden" }, "Pads"),
    h("thead", {}, h("tr", {}, ["Name", "Status", "Memory", "Last activity", "Cells"].map((t) => h("th", { scope: "col" }, t)))),
    body,
  );
  root.replaceChildren(h("section", { class: "pads-page" }, h("div", { class: "page-head" }, h("h1", {}, "Pads"), newPadForm()), notice, table, empty));
  let pads = [];
  const draw = () => {
    replace(body, pads.map((pad) => row(pad, wake)));
    empty.hidden = pads.length > 0;
    table.hidden = pads.length === 0;
  };
  const refresh = async () => {
    try {
      pads = (await getJSON("/v1/pads")).pads || [];
      notice.hidden = true;
    } catch (error) {
      notice.hidden = false;
      notice.textContent = `Could not list the pads: ${error.message}`;
    }
    draw();
  };
  const wake = async (name, button) => {
    button.disabled = true;
    button.textContent = "Waking…";
    try {
      await sendJSON("/scratchpad/start", { name });
      notice.hidden = true;
    } catch (error) {
      notice.hidden = false;
      notice.textContent = `Could not wake ${name}: ${error.message}`;
    }
    await refresh();
  };
  refresh();
  const poll = setInterval(refresh, REFRESH_MS);
  const tick = setInterval(() => pads.some((p) => p.status === "busy") && draw(), 1000);
  return () => {
    clearInterval(poll);
    clearInterval(tick);
  };
}

function row(pad, wake) {
  const link = h("a", { href: `#/pads/${encodeURIComponent(pad.name)}` }, pad.name);
  const status = h("td", { "data-label": "Status" }, statusChip(pad));
  if (pad.status === "busy" && pad.running?.description) {
    status.append(h("span", { class: "running-what" }, pad.running.description));
  }
  if (pad.status === "asleep") {
    const button = h("button", { type: "button", class: "small wake", "aria-label": `Wake ${pad.name}` }, "Wake");
    button.addEventListener("click", () => wake(pad.name, button));
    status.append(" ", button);
  }
  return h(
    "tr",
    { "data-pad": pad.name },
    h("th", { scope: "row" }, link),
    status,
    h("td", { class: "num", "data-label": "Memory" }, pad.memory_bytes ? bytes(pad.memory_bytes) : "—"),
    h("td", { "data-label": "Last activity" }, ago(pad.last_activity)),
    h("td", { class: "num", "data-label": "Cells" }, String(pad.cells ?? "—")),
  );
}

function newPadForm() {
  const input = h("input", { id: "new-pad", name: "pad", required: true, maxlength: 128, placeholder: "analysis", autocomplete: "off" });
  const form = h(
    "form",
    { class: "new-pad" },
    h("label", { for: "new-pad" }, "New pad"),
    input,
    h("button", { type: "submit", class: "primary" }, "Open"),
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const name = input.value.trim();
    if (/[\u0000-\u001f\u007f]/.test(name)) {
      input.setCustomValidity("A pad name has no control characters.");
      input.reportValidity();
      return;
    }
    if (name) location.hash = `#/pads/${encodeURIComponent(name)}`;
  });
  input.addEventListener("input", () => input.setCustomValidity(""));
  return form;
}
