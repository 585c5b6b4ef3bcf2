// One cell on the page, from queued through running (live output in the order it came,
// elapsed time, Cancel) to its recorded form. Live text keeps its head and a rolling tail in
// a box of bounded height that follows the tail (unless scrolled back), so a chatty cell never
// grows the page without bound; the recorded cell then shows head + tail with "show all", its
// stdout, stderr and displays in the order the cell made them (a cell the page did not watch
// too: its record says where each display came), and its result in its richest form.

import { highlight } from "./highlight.js";
import { h, replace } from "./dom.js";
import { duration, since } from "./format.js";
import { errorBlock, isRich, longText, richOutput } from "./outputs.js";

const LIVE_KEEP = 32 * 1024;
const MAX_BLOCKS = 200; // output blocks a running cell keeps (the first and the latest)
const HEAD_BLOCKS = 20;

/** Whether a scrolled box shows its end (then it keeps following what comes). */
function atEnd(element) {
  return element.scrollTop + element.clientHeight >= element.scrollHeight - 4;
}

/** Text streamed into a <pre>: the first LIVE_KEEP characters, then a rolling tail. */
class LiveText {
  constructor(stream) {
    this.stream = stream;
    this.head = document.createTextNode("");
    this.tail = document.createTextNode("");
    this.cut = h("span", { class: "cut", hidden: true });
    this.dropped = 0;
    this.element = h("pre", { class: `stream ${stream}` }, this.head, this.cut, this.tail);
  }

  append(text) {
    const following = atEnd(this.element);
    const room = LIVE_KEEP - this.head.length;
    if (room > 0) {
      this.head.appendData(text.slice(0, room));
      text = text.slice(room);
    }
    if (text) {
      this.tail.appendData(text);
      const over = this.tail.length - LIVE_KEEP;
      if (over > 0) {
        this.tail.deleteData(0, over);
        this.dropped += over;
        this.cut.hidden = false;
        this.cut.textContent = `\n… ${this.dropped.toLocaleString()} characters not shown while running …\n`;
      }
    }
    if (following) this.element.scrollTop = this.element.scrollHeight;
  }
}

/**
 * What a running cell made, in the order it came: text of one stream goes on in its block
 * until the other stream or a display comes between. The first blocks and the latest are kept.
 */
class LiveFlow {
  constructor() {
    this.first = h("div", { class: "flow" });
    this.note = h("p", { class: "cut", hidden: true });
    this.latest = h("div", { class: "flow" });
    this.element = h("div", { class: "flow" }, this.first, this.note, this.latest);
    this.blocks = [];
    this.skipped = 0;
  }

  text(stream, text) {
    const last = this.blocks[this.blocks.length - 1];
    if (last instanceof LiveText && last.stream === stream) return last.append(text);
    const block = new LiveText(stream);
    this.add(block, block.element);
    block.append(text);
  }

  display(element) {
    this.add(element, element);
  }

  add(block, element) {
    this.blocks.push(block);
    if (this.blocks.length <= HEAD_BLOCKS) return this.first.append(element);
    this.latest.append(element);
    if (this.blocks.length <= MAX_BLOCKS) return;
    const [gone] = this.blocks.splice(HEAD_BLOCKS, 1);
    this.latest.firstElementChild.remove();
    this.skipped += gone ? 1 : 0;
    this.note.hidden = false;
    this.note.textContent = `… ${this.skipped.toLocaleString()} outputs not shown while running …`;
  }

  /** Whether the flow holds all `cell` made (then its order is kept when it is recorded). */
  holds(cell) {
    if (this.skipped) return false;
    const texts = { stdout: "", stderr: "" };
    let displays = 0;
    for (const block of this.blocks) {
      if (!(block instanceof LiveText)) displays += 1;
      else if (block.dropped) return false;
      else texts[block.stream] += block.head.data + block.tail.data;
    }
    return texts.stdout === (cell.stdout || "") && texts.stderr === (cell.stderr || "") && displays === (cell.outputs || []).length;
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

  /** `label`: the cell's own status once recorded (ok, error, timeout, killed, cancelled). */
  setState(state, label = state) {
    this.state = state;
    this.element.dataset.status = state;
    this.badge.className = `badge status-${label}`;
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
    this.flow = new LiveFlow();
    replace(this.body, this.progressLine, this.flow.element);
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
    this.flow.text(stream === "stderr" ? "stderr" : "stdout", text);
  }

  display(bundle) {
    if (this.state !== "done") this.flow.display(richOutput(bundle));
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
    // seen whole while it ran: what it made stays as it came, else in the order its record gives
    const flow = this.flow?.holds(cell) ? this.flow : null;
    replace(this.body, ...recorded(this.pad, cell, flow));
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

/** The recorded cell's parts; `flow`: its outputs as they came, when the page saw them all. */
function recorded(pad, cell, flow = null) {
  const parts = [];
  if (flow) {
    if (flow.blocks.length) parts.push(flow.element);
  } else {
    parts.push(...inOrder(pad, cell));
  }
  const rich = isRich(cell.result_data);
  if (rich || (cell.result !== null && cell.result !== undefined && cell.result !== "")) {
    const shown = rich
      ? richOutput({ ...cell.result_data, "text/plain": cell.result || "" })
      : longText(pad, cell.id, "result", cell.result, "result-text");
    parts.push(h("div", { class: "result" }, h("span", { class: "out-label" }, "Out"), shown));
  }
  if (cell.error) parts.push(errorBlock(pad, cell.id, cell.error, cell.status));
  if (cell.logs) {
    const lines = cell.logs.replace(/\s+$/, "").split("\n").length;
    parts.push(h("details", { class: "logs" }, h("summary", {}, `Log (${lines} lines)`), h("pre", {}, cell.logs)));
  }
  return parts;
}

const STREAMS = ["stdout", "stderr"];

/**
 * A recorded cell's stdout, stderr and displays in the order it made them: `outputs_at`
 * gives, per display, how many characters (code points) of each stream came before it. A
 * record without it shows them grouped by kind: stdout, stderr, then the displays.
 */
function inOrder(pad, cell) {
  const outputs = cell.outputs || [];
  const known = Array.isArray(cell.outputs_at) && cell.outputs_at.length === outputs.length;
  const streams = STREAMS.map((name, i) => {
    const text = cell[name] || "";
    const total = codePoints(text);
    const places = outputs.map((_, n) => (known ? Math.min(Number(cell.outputs_at[n]?.[i]) || 0, total) : total));
    const points = [0, ...places, total]; // where each piece ends, before each display and at the end
    return { name, text, total, points, units: unitIndexes(text, points), last: 0 };
  });
  const parts = [];
  for (let n = 1; n <= outputs.length + 1; n += 1) {
    for (const stream of streams) {
      const { name, text, total, points, units, last } = stream;
      if (units[n] <= units[last]) continue;
      const whole = points[last] === 0 && points[n] === total; // then "show all" reads the field
      const span = whole ? null : { start: points[last], end: points[n], total };
      parts.push(longText(pad, cell.id, name, text.slice(units[last], units[n]), `stream ${name}`, span));
      stream.last = n;
    }
    if (n <= outputs.length) parts.push(richOutput(outputs[n - 1]));
  }
  return parts;
}

/** The number of code points of `text` (what the server counts). */
function codePoints(text) {
  const pairs = text.match(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g);
  return text.length - (pairs ? pairs.length : 0);
}

/** The UTF-16 index of each code point offset in `places` (in order), at most the end. */
function unitIndexes(text, places) {
  if (!/[\uD800-\uDFFF]/.test(text)) return places.map((place) => Math.min(place, text.length));
  let unit = 0;
  let point = 0;
  return places.map((place) => {
    for (; point < place && unit < text.length; point += 1) {
      const code = text.charCodeAt(unit);
      unit += code >= 0xd800 && code < 0xdc00 && unit + 1 < text.length ? 2 : 1;
    }
    return unit;
  });
}
