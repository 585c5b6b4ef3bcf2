// A small, safe subset of Markdown as DOM nodes (a cell's text/markdown output): headings,
// paragraphs, lists, block quotes, fenced and indented code, rules, and inline code,
// emphasis, strong and links (http(s) only). Everything else stays text: no HTML of the cell
// ever reaches the page as markup.

import { h, outLink } from "./dom.js";

const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|\[([^\]]+)\]\(([^)\s]+)\)/g;

/** Inline Markdown of `text` as nodes. */
function inline(text) {
  const nodes = [];
  let at = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > at) nodes.push(text.slice(at, match.index));
    const [whole, ticks, code, strong1, strong2, em1, em2, label, url] = match;
    if (ticks) nodes.push(h("code", {}, code.trim() || code));
    else if (strong1 || strong2) nodes.push(h("strong", {}, inline(strong1 || strong2)));
    else if (em1 || em2) nodes.push(h("em", {}, inline(em1 || em2)));
    else nodes.push(outLink(url, label) || whole);
    at = match.index + whole.length;
  }
  if (at < text.length) nodes.push(text.slice(at));
  return nodes;
}

const BLOCK_START = /^(#{1,6}\s|```|~~~|>\s?|\s*([-*+]|\d+[.)])\s|(\*\s*){3,}$|(-\s*){3,}$|(_\s*){3,}$)/;

/** `source` (Markdown) as a fragment of elements. */
export function markdown(source) {
  const lines = String(source).replace(/\r\n?/g, "\n").split("\n");
  const out = document.createDocumentFragment();
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) {
      i++;
      continue;
    }
    const fence = line.match(/^(```|~~~)/);
    if (fence) {
      const body = [];
      for (i++; i < lines.length && !lines[i].startsWith(fence[1]); i++) body.push(lines[i]);
      i++;
      out.append(h("pre", {}, h("code", {}, body.join("\n"))));
      continue;
    }
    const heading = line.match(/^(#{1,6})\s+(.*?)\s*#*\s*$/);
    if (heading) {
      out.append(h(`h${heading[1].length}`, {}, inline(heading[2])));
      i++;
      continue;
    }
    if (/^\s*((\*\s*){3,}|(-\s*){3,}|(_\s*){3,})$/.test(line)) {
      out.append(h("hr", {}));
      i++;
      continue;
    }
    if (/^>\s?/.test(line)) {
      const quoted = [];
      for (; i < lines.length && /^>\s?/.test(lines[i]); i++) quoted.push(lines[i].replace(/^>\s?/, ""));
      out.append(h("blockquote", {}, markdown(quoted.join("\n"))));
      continue;
    }
    const item = /^\s*([-*+]|\d+[.)])\s+(.*)$/;
    if (item.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? "ol" : "ul", {});
      for (; i < lines.length && item.test(lines[i]); i++) list.append(h("li", {}, inline(lines[i].match(item)[2])));
      out.append(list);
      continue;
    }
    if (/^( {4}|\t)/.test(line)) {
      const body = [];
      for (; i < lines.length && (/^( {4}|\t)/.test(lines[i]) || !lines[i].trim()); i++) body.push(lines[i].replace(/^( {4}|\t)/, ""));
      out.append(h("pre", {}, h("code", {}, body.join("\n").replace(/\s+$/, ""))));
      continue;
    }
    const para = [];
    for (; i < lines.length && lines[i].trim() && (!para.length || !BLOCK_START.test(lines[i])); i++) para.push(lines[i].trim());
    out.append(h("p", {}, inline(para.join(" "))));
  }
  return out;
}
