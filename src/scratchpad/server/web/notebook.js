// The live notebook of one pad (#/pads/<name>). Everything on it comes from the pad's feed
// (GET /v1/pads/{name}/events): a snapshot (then the recorded cells are read), then queued /
// started / output / display / progress / cell / status frames, so a cell run by an agent
// shows up exactly like one run from here. Cells are keyed by id: the stream of a cell run
// from this page only fills in what the feed does not (it carries no output while the feed
// is live), so nothing shows twice. The header's status follows the frames (busy from a
// cell's start to its end); a pad that does not exist (yet) offers no Reset or Remove; an
// asleep pad says so, with its last activity, and offers Wake (its next cell wakes it too;
// that cell's log says which variables came back).
// Without a feed (an older server) the page polls.

import { download, follow, getJSON, padPath, postStream, sendJSON } from "./api.js";
import { CellView } from "./cellview.js";
import { confirmDialog, h } from "./dom.js";
import { cellEditor } from "./editor.js";
import { ago } from "./format.js";
import { padHeader } from "./padstatus.js";

const POLL_MS = 3000;
const FEED_GRACE_MS = 2000; // how long a cell's own stream lets the feed finish the cell
const ASLEEP_TICK_MS = 10_000;

export function mount(root, params) {
  const notebook = new Notebook(root, params.name);
  return () => notebook.close();
}

class Notebook {
  constructor(root, name) {
    this.name = name;
    this.views = new Map(); // cell id → CellView
    this.live = false; // the feed has sent its snapshot and is open
    this.pending = null; // frames that came while the recorded cells were read
    this.closed = false;
    this.aborts = new Set();
    this.info = null; // the pad as the feed last described it
    this.running = null; // {id, started_at} of the cell the kernel is in
    this.waiting = new Set(); // ids of queued cells
    this.cleared = new Set(); // ids of cells a reset from here deleted
    this.notice = h("div", { class: "notice", role: "status", "aria-live": "polite", hidden: true });
    this.asleepText = h("span", {});
    this.wakeButton = h("button", { type: "button", class: "small wake", "aria-label": `Wake ${name}`, onclick: () => this.wake() }, "Wake");
    this.asleep = h("div", { class: "asleep-note", role: "status", hidden: true }, this.asleepText, " ", this.wakeButton);
    this.asleepTimer = setInterval(() => this.asleepInfo && this.showAsleep(this.asleepInfo), ASLEEP_TICK_MS); // "last active" moves on
    this.list = h("div", { class: "cells" });
    this.empty = h("p", { class: "empty" }, "No cells yet: write one below and press Shift-Enter. The pad is created by its first run.");
    this.editor = cellEditor((code) => this.run(code));
    const notebook = `${padPath(name)}/notebook`;
    const save = (event) => {
      event.preventDefault(); // a link cannot carry the session: its signed URL can
      download(notebook, "").catch((error) => this.say(`Could not download the notebook: ${error.message}`, true));
    };
    const ipynb = h("a", { class: "button", href: notebook, onclick: save }, "Download .ipynb");
    const revert = h("button", { type: "button", onclick: () => this.revert() }, "Revert last cell");
    const reset = h("button", { type: "button", onclick: () => this.reset() }, "Reset");
    const remove = h("button", { type: "button", class: "danger", onclick: () => this.remove() }, "Remove");
    this.actions = [ipynb, revert, reset, remove];
    this.header = padHeader(name, "notebook", this.actions);
    this.showInfo(null);
    root.replaceChildren(h("section", { class: "notebook" }, this.header.element, this.asleep, this.notice, this.empty, this.list, this.editor.element));
    this.connect();
  }

  connect() {
    this.stopFeed?.();
    this.live = false;
    let opened = false;
    this.stopFeed = follow(
      `${padPath(this.name)}/events`,
      (frame) => {
        opened = true;
        this.onFrame(frame);
      },
      ({ closed }) => {
        this.live = false; // until the stream's next snapshot
        if (closed || !opened) this.fallBack();
      },
    );
  }

  /** No feed here (or it failed): read the recorded cells now and every few seconds. */
  fallBack() {
    this.stopFeed?.();
    this.stopFeed = null;
    this.live = false;
    if (this.poller || this.closed) return;
    const poll = async () => {
      await this.loadCells().catch((error) => this.say(error.message, true));
      this.loadInfo();
    };
    poll();
    this.poller = setInterval(poll, POLL_MS);
  }

  async loadInfo() {
    const { pads } = await getJSON("/v1/pads").catch(() => ({ pads: [] }));
    const info = pads.find((pad) => pad.name === this.name) || null;
    this.header.setInfo(info);
    this.showActions(info !== null);
    this.showAsleep(info);
  }

  /** The pad's status as the feed said it, with what its frames said since. */
  showInfo(info) {
    if (info !== undefined) this.info = info;
    const shown = this.info;
    this.showActions(shown !== null && !["new", "removed"].includes(shown.status));
    this.showAsleep(this.running ? null : shown);
    if (!shown) return this.header.setInfo(null);
    const queued = this.waiting.size;
    if (this.running) {
      return this.header.setInfo({ ...shown, status: "busy", busy_since: this.running.started_at, queued });
    }
    const status = shown.status === "busy" ? "idle" : shown.status;
    this.header.setInfo({ ...shown, status, busy_since: null, queued });
  }

  /** An asleep pad says so, with when it was last active, beside its Wake button. */
  showAsleep(info) {
    this.asleepInfo = info;
    const asleep = info?.status === "asleep";
    this.asleep.hidden = !asleep;
    if (!asleep) return;
    const last = info.last_activity ? `last active ${ago(info.last_activity)}` : "no activity known";
    this.asleepText.textContent =
      `This pad is asleep (${last}): its kernel is stopped and its variables are saved. ` +
      "Wake it, or run a cell: the first cell's log says which variables came back.";
  }

  /** Start the asleep pad's kernel (its variables are restored); the feed says when. */
  async wake() {
    this.wakeButton.disabled = true;
    this.wakeButton.textContent = "Waking…";
    try {
      await sendJSON("/scratchpad/start", { name: this.name });
      if (!this.live) await this.loadInfo();
    } catch (error) {
      this.say(`Could not wake ${this.name}: ${error.message}`, true);
    } finally {
      this.wakeButton.disabled = false;
      this.wakeButton.textContent = "Wake";
    }
  }

  /** Reset, Remove and the download only for a pad that exists. */
  showActions(exists) {
    for (const action of this.actions) action.hidden = !exists;
  }

  /** The recorded cells, shown; a pad that does not exist yet has none. */
  async loadCells() {
    let cells = [];
    try {
      cells = (await getJSON(padPath(this.name))).cells;
    } catch (error) {
      if (error.status !== 404) throw error;
    }
    for (const cell of cells) this.view(cell).finish(cell);
    this.empty.hidden = this.views.size > 0;
    return cells;
  }

  onFrame(frame) {
    if (!frame || typeof frame !== "object") return;
    if (frame.type === "snapshot") return this.snapshot(frame);
    if (this.pending) return void this.pending.push(frame);
    this.apply(frame);
  }

  async snapshot(frame) {
    this.pending = [];
    this.running = frame.running ? { id: frame.running.id, started_at: frame.running.started_at } : null;
    this.waiting = new Set((frame.queued || []).map((cell) => cell.id));
    this.showInfo(frame.pad || null);
    try {
      const recorded = await this.loadCells();
      this.order(recorded, frame);
    } catch (error) {
      this.say(`Could not read the pad's cells: ${error.message}`, true);
    }
    const pending = this.pending;
    this.pending = null;
    this.live = true;
    clearInterval(this.poller);
    this.poller = null;
    for (const queued of pending) this.apply(queued);
  }

  /** The page's cells in the snapshot's order: recorded, running, queued, then ours. */
  order(recorded, frame) {
    const ids = recorded.map((cell) => cell.id);
    if (frame.running) {
      const running = frame.running;
      this.view(running).start(running.started_at, running);
      ids.push(running.id);
    }
    for (const queued of frame.queued || []) {
      this.view(queued);
      ids.push(queued.id);
    }
    for (const [id, view] of this.views) {
      if (!ids.includes(id) && (view.state !== "done" || view.ours)) ids.push(id);
    }
    this.list.replaceChildren(...ids.map((id) => this.views.get(id).element));
    this.empty.hidden = ids.length > 0;
  }

  apply(frame) {
    const id = frame.id ?? frame.cell?.id;
    if (this.cleared.has(id)) return; // a reset from here deleted it
    switch (frame.type) {
      case "queued":
        this.waiting.add(id);
        this.showInfo();
        return void this.view(frame.cell);
      case "started":
        this.waiting.delete(id);
        this.running = { id, started_at: frame.started_at };
        this.showInfo();
        return this.view({ id, number: frame.number }).start(frame.started_at);
      case "output":
        return this.views.get(id)?.output(frame.stream, frame.text);
      case "display":
        return this.views.get(id)?.display(frame.data);
      case "progress":
        return this.views.get(id)?.progress(frame.message);
      case "cell":
        this.waiting.delete(id);
        if (this.running?.id === id) this.running = null;
        this.showInfo();
        return this.view(frame.cell).finish(frame.cell);
      case "status":
        if (frame.pad && !["busy", "dead"].includes(frame.pad.status)) this.running = null;
        if (frame.pad?.cells === 0) this.forgetRecorded(); // reset (by anyone) or removed
        return this.showInfo(frame.pad || null);
      case "overflow":
        return this.connect(); // the feed fell behind: a new snapshot sets everything right
    }
  }

  /** The cell's view, made (and added at the end) when it is new. */
  view(cell) {
    let view = this.views.get(cell.id);
    if (!view) {
      view = new CellView(this.name, cell, (id) => this.cancel(id));
      this.views.set(cell.id, view);
      this.list.append(view.element);
      this.empty.hidden = true;
    } else if (cell.code) {
      view.setCode(cell.code, cell.description);
    }
    view.setNumber(cell.number);
    return view;
  }

  async run(code) {
    const id = newId();
    const view = this.view({ id, code, description: "" });
    view.ours = true;
    this.editor.area.value = "";
    view.element.scrollIntoView({ block: "nearest" });
    if (!this.live) view.start(Date.now() / 1000);
    const abort = new AbortController();
    this.aborts.add(abort);
    const body = { name: this.name, code, id, stream_output: true, on_disconnect: "continue" };
    try {
      await postStream("/scratchpad/execute-stream", body, ({ data }) => this.ownFrame(view, data), abort.signal);
    } catch (error) {
      if (!abort.signal.aborted) view.fail(error.message);
    } finally {
      this.aborts.delete(abort);
    }
    if (!this.live && !this.closed) this.connect(); // the pad may have a feed now
  }

  ownFrame(view, frame) {
    if (!frame || typeof frame !== "object") return;
    if (frame.type === "cell") {
      // the feed's frames may still be on their way (the last output, then its own copy of
      // this cell): it finishes the cell; this copy only when the feed stays silent
      if (!this.live) return view.finish(frame.cell);
      return void setTimeout(() => view.state !== "done" && !this.closed && view.finish(frame.cell), FEED_GRACE_MS);
    }
    if (frame.type === "error") return view.fail(frame.error);
    if (this.live) return; // the feed shows this cell's output
    if (view.state === "queued") view.start(Date.now() / 1000);
    if (frame.type === "output") view.output(frame.stream, frame.text);
    else if (frame.type === "display") view.display(frame.data);
    else if (frame.type === "progress") view.progress(frame.message);
  }

  async cancel(id) {
    try {
      await sendJSON("/scratchpad/cancel", { name: this.name, id });
    } catch (error) {
      this.say(`Cancel failed: ${error.message}`, true);
    }
  }

  /** Variables back to before the last cell that changed them; the cells stay on the page. */
  async revert() {
    if (this.closed) return;
    let answer;
    try {
      answer = await sendJSON("/scratchpad/revert", { name: this.name });
    } catch (error) {
      return this.say(`Revert failed: ${error.message}`, true);
    }
    this.say(`Variables reverted: they are as they were after cell ${answer.after_cell}. The cells after it stay recorded.`);
  }

  async reset() {
    const sure = await confirmDialog(
      `Reset ${this.name}?`,
      "The kernel restarts: every variable is lost, a running or queued cell is stopped, and every recorded cell is deleted. The pad's files and installed packages stay.",
      "Reset",
    );
    if (!sure || this.closed) return;
    try {
      await sendJSON("/scratchpad/reset", { name: this.name });
    } catch (error) {
      return this.say(`Reset failed: ${error.message}`, true);
    }
    this.clear();
    this.say("The pad was reset: its variables and recorded cells are gone.");
  }

  /** The recorded cells off the page (the pad has none any more); cells to come stay. */
  forgetRecorded() {
    for (const [id, view] of this.views) {
      if (view.state !== "done") continue;
      view.destroy();
      view.element.remove();
      this.views.delete(id);
      this.cleared.add(id);
    }
    this.empty.hidden = this.views.size > 0;
  }

  /** Every cell off the page (after a reset: the server deleted them). */
  clear() {
    for (const [id, view] of this.views) {
      view.destroy();
      this.cleared.add(id);
    }
    this.views.clear();
    this.running = null;
    this.waiting.clear();
    this.list.replaceChildren();
    this.empty.hidden = false;
    this.showInfo();
  }

  async remove() {
    const sure = await confirmDialog(`Remove ${this.name}?`, "Its kernel, its environment and every recorded cell are deleted. This cannot be undone.", "Remove");
    if (!sure || this.closed) return;
    try {
      await sendJSON("/scratchpad/cleanup", { name: this.name });
      location.hash = "#/";
    } catch (error) {
      this.say(`Remove failed: ${error.message}`, true);
    }
  }

  say(message, bad = false) {
    this.notice.hidden = false;
    this.notice.className = bad ? "notice bad" : "notice";
    this.notice.textContent = message;
  }

  close() {
    this.closed = true;
    this.stopFeed?.();
    clearInterval(this.poller);
    clearInterval(this.asleepTimer);
    this.header.destroy();
    for (const abort of this.aborts) abort.abort();
    for (const view of this.views.values()) view.destroy();
  }
}

function newId() {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
