// Fenced `data-vault-form` / `data-vault-form-patch` blocks in text that arrives in pieces
// (the deltas of a submission's stream): a block may be split anywhere, even inside its
// fence line. The reader gives back the blocks it completed and the prose around them, so
// prose shows as it streams and a block is applied only once it is whole. Fences are read
// as the Python `find_blocks` reads them: up to three spaces, three or more backticks or
// tildes, closed by a line of at least as many of the same character.

export const FORM_BLOCK = "data-vault-form";
export const PATCH_BLOCK = "data-vault-form-patch";
const OPEN = /^ {0,3}(`{3,}|~{3,})[ \t]*([^\s`]*)[^`]*$/;
const MAYBE_OPEN = /^ {0,3}(`*|~*)$|^ {0,3}(`{3,}|~{3,})/; // could still be a fence line

function closing(fence) {
  return new RegExp(`^ {0,3}${fence[0]}{${fence.length},}[ \\t]*$`);
}

export class BlockReader {
  constructor() {
    this.pending = ""; // the start of a line not yet ended
    this.midLine = false; // part of the current line went out as prose already
    this.fence = null; // {close, kind, lines} while inside a fence
  }

  /** Feed a piece of text; `{prose, blocks}` completed by it (`blocks`: [{kind, body}]). */
  feed(text) {
    const out = { prose: "", blocks: [] };
    this.pending += text.replace(/\r\n?/g, "\n");
    let end;
    while ((end = this.pending.indexOf("\n")) >= 0) {
      const line = this.pending.slice(0, end);
      this.pending = this.pending.slice(end + 1);
      this.line(line, out, true);
    }
    if (this.pending && !this.fence && (this.midLine || !MAYBE_OPEN.test(this.pending))) {
      out.prose += this.pending; // cannot open a fence: show it now
      this.pending = "";
      this.midLine = true;
    }
    return out;
  }

  /** The end of the text: what is held back goes out as prose; an unclosed block is lost. */
  end() {
    const out = { prose: "", blocks: [] };
    if (this.pending) this.line(this.pending, out, false);
    this.pending = "";
    this.midLine = false;
    this.fence = null;
    return out;
  }

  line(line, out, ended) {
    const newline = ended ? "\n" : "";
    if (this.midLine) {
      this.midLine = !ended;
      out.prose += line + newline;
      return;
    }
    if (this.fence) {
      this.inFence(line, out, newline);
      return;
    }
    const open = OPEN.exec(line);
    if (!open) {
      out.prose += line + newline;
      return;
    }
    const language = open[2].toLowerCase();
    const ours = language === FORM_BLOCK || language === PATCH_BLOCK;
    this.fence = { close: closing(open[1]), kind: ours ? language : null, lines: [] };
    if (!ours) out.prose += line + newline; // another fence (code): prose, kept whole
  }

  inFence(line, out, newline) {
    const { close, kind, lines } = this.fence;
    if (close.test(line)) {
      this.fence = null;
      if (kind === null) out.prose += line + newline;
      else {
        const body = parseObject(lines.join("\n"));
        if (body) out.blocks.push({ kind, body });
      }
      return;
    }
    if (kind === null) out.prose += line + newline;
    else lines.push(line);
  }
}

function parseObject(text) {
  try {
    const value = JSON.parse(text);
    return value !== null && typeof value === "object" && !Array.isArray(value) ? value : null;
  } catch {
    return null;
  }
}
