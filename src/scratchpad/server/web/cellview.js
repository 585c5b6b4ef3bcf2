// One cell on the page, from queued through running (live output, elapsed time, Cancel) to
// its recorded form. Live text keeps its head and a rolling tail so a chatty cell never
// grows the page without bound; the recorded cell then shows head + tail with "show all".

import { highlight } from "./highlight.js";
import { h, replace } from "./dom.js";
import { duration, since } from "./format.js";
import { errorBlock, longText, richOutput } from "./outputs.js";

const LIVE_KEEP = 32 * 1024;

/** Text streamed into a <pre>: the first LIVE_KEEP characters, then a rolling tail. */
class LiveText {
  constructor(className) {
    this.head = document.createTextNode("");
    this.tail = document.createTextNode("");
    this.cut = h("span", { class: "cut", hidden: true });
    this.dropped = 0;
    this.element = h("pre", { class: className, hidden: true }, this.head, this.cut, this.tail);
  }

  append(text) {
    this.element.hidden = false;
    const room = LIVE_KEEP - this.head.length;
    if (room > 0) {
      this.head.appendData(text.slice(0, room));
      text = text.slice(room);
    }
    if (!text) return;
    this.tail.appendData(text);
    const over = this.tail.length - LIVE_KEEP;
    if (over > 0) {
      this.tail.deleteData(0, over);
      this.dropped += over;
      this.cut.hidden = false;
      this.cut.textContent = `\n… ${this.dropped.toLocaleString()} characters not shown while running …\n`;
    }
  }
}

export class CellView {
  /** `cell`: at least {id, code, description}. */
  constructor(pad, cell, onCancel) {
    this.pad = pad;
    this.id = cell.id;
    this.onCancel = onCancel;
    this.timer = null;
    this.state = "queued";
    this.badge = h("span", { class: "badge" });
    this.number = h("span", { class: "cell-number" });
    this.description = h("span", { class: "description" });
    this.clock = h("span", { class: "duration", "aria-live": "off" });
    this.cancelButton = h("button", { type: "button", class: "small", onclick: () => this.cancel() }, "Cancel");
    this.status = h("span", { class: "visually-hidden", "aria-live": "polite" });
    this.code = h("code", {});
    this.body = h("div", { class: "outputs" });
    this.element = h(
      "article",
      { class: "cell", "data-id": cell.id, "aria-label": "cell" },
      h("header", { class: "cell-head" }, this.number, this.badge, this.description, this.clock, this.cancelButton, this.status),
      h("pre", { class: "code" }, this.code),
      this.body,
    );
    this.setCode(cell.code || "", cell.description || "");
    this.setNumber(cell.number);
    this.queued();
  }

  /** `[N]`: the cell's number in its pad, as view, dump and the notebook show it. */
  setNumber(number) {
    if (number) this.number.textContent = `[${number}]`;
  }

  setCode(code, description) {
    if (code && code !== this.shownCode) {
      this.shownCode = code;
      replace(this.code, highlight(code));
    }
    if (description !== undefined) this.description.textContent = description;
  }

  setState(state, label = state) {
    this.state = state;
    this.element.dataset.status = state;
    this.badge.className = `badge status-${state}`;
    this.badge.textContent = label;
    this.status.textContent = `cell ${label}`;
    this.cancelButton.hidden = !(state === "queued" || state === "running");
  }

  queued() {
    this.setState("queued");
    this.liveBody();
  }

  liveBody() {
    this.progressLine = h("div", { class: "progress", hidden: true });
    this.streams = { stdout: new LiveText("stream stdout"), stderr: new LiveText("stream stderr") };
    this.displays = h("div", { class: "displays" });
    replace(this.body, this.progressLine, this.streams.stdout.element, this.streams.stderr.element, this.displays);
  }

  /** Running since `startedAt` (epoch seconds); what ran so far, when a snapshot has it. */
  start(startedAt, sofar = {}) {
    if (this.state === "done") return;
    if (this.state !== "running" || sofar.stdout !== undefined) this.liveBody();
    this.setState("running");
    this.startedAt = startedAt || Date.now() / 1000;
    for (const stream of ["stdout", "stderr"]) if (sofar[stream]) this.output(stream, sofar[stream]);
    for (const bundle of sofar.outputs || []) this.display(bundle);
    if (sofar.progress) this.progress(sofar.progress);
    clearInterval(this.timer);
    const tick = () => (this.clock.textContent = duration(Math.floor(since(this.startedAt))));
    tick();
    this.timer = setInterval(tick, 500);
  }

  output(stream, text) {
    if (this.state === "done") return;
    const live = this.streams[stream === "stderr" ? "stderr" : "stdout"];
    live.append(text);
  }

  display(bundle) {
    if (this.state !== "done") this.displays.append(richOutput(bundle));
  }

  progress(message) {
    if (this.state === "done") return;
    this.progressLine.hidden = false;
    this.progressLine.textContent = message;
  }

  async cancel() {
    this.cancelButton.disabled = true;
    this.cancelButton.textContent = "Cancelling…";
    try {
      await this.onCancel(this.id);
    } finally {
      this.cancelButton.disabled = false;
      this.cancelButton.textContent = "Cancel";
    }
  }

  /** The recorded cell (idempotent: a second copy of it changes nothing). */
  finish(cell) {
    const key = [cell.status, cell.duration_s, cell.stdout?.length, cell.outputs?.length, cell.error?.length].join("|");
    if (this.state === "done" && this.finished === key) return;
    this.finished = key;
    clearInterval(this.timer);
    this.setCode(cell.code, cell.description);
    this.setNumber(cell.number);
    this.setState("done", cell.status || "ok");
    this.element.dataset.status = cell.status || "ok";
    this.clock.textContent = duration(cell.duration_s);
    replace(this.body, ...recorded(this.pad, cell));
  }

  /** The run could not happen (the server said why). */
  fail(message) {
    clearInterval(this.timer);
    this.setState("failed");
    replace(this.body, h("div", { class: "error" }, h("pre", { class: "error-line" }, message)));
  }

  destroy() {
    clearInterval(this.timer);
  }
}

function recorded(pad, cell) {
  const parts = [];
  const text = (field, className) =>
    cell[field] ? parts.push(longText(pad, cell.id, field, cell[field], className)) : null;
  text("stdout", "stream stdout");
  text("stderr", "stream stderr");
  for (const bundle of cell.outputs || []) parts.push(richOutput(bundle));
  if (cell.result !== null && cell.result !== undefined && cell.result !== "") {
    parts.push(h("div", { class: "result" }, h("span", { class: "out-label" }, "Out"), longText(pad, cell.id, "result", cell.result, "result-text")));
  }
  if (cell.error) parts.push(errorBlock(pad, cell.id, cell.error));
  if (cell.logs) {
    const lines = cell.logs.replace(/\s+$/, "").split("\n").length;
    parts.push(h("details", { class: "logs" }, h("summary", {}, `Log (${lines} lines)`), h("pre", {}, cell.logs)));
  }
  return parts;
}
