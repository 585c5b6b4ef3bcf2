// A small Python highlighter: the code becomes text nodes and <span class="tok-…"> elements
// (never HTML from the code), for keywords, strings (triple-quoted, prefixed, f-strings with
// their {fields}), comments, numbers, decorators, builtins and names after def / class.

const KEYWORDS = new Set(
  (
    "and as assert async await break class continue def del elif else except finally for " +
    "from global if import in is lambda nonlocal not or pass raise return try while with " +
    "yield match case type"
  ).split(" "),
);
const CONSTANTS = new Set(["True", "False", "None", "self", "cls", "Ellipsis", "NotImplemented"]);
const BUILTINS = new Set(
  (
    "abs all any bool bytes callable chr dict dir divmod enumerate filter float format " +
    "frozenset getattr hasattr hash help hex id input int isinstance issubclass iter len " +
    "list map max min next object open ord pow print range repr reversed round set setattr " +
    "slice sorted str sum super tuple type vars zip display progress sample"
  ).split(" "),
);
const SOFT_KEYWORDS = new Set(["match", "case", "type"]);

// One alternation, tried at each position; the first group that matches names the token.
const TOKEN = new RegExp(
  [
    /(?<comment>#[^\n]*)/,
    /(?<string>(?:[rRbBuUfF]{1,2})?(?:'''[\s\S]*?(?:'''|$(?![\s\S]))|"""[\s\S]*?(?:"""|$(?![\s\S]))|'(?:\\[\s\S]|[^'\\\n])*'?|"(?:\\[\s\S]|[^"\\\n])*"?))/,
    /(?<decorator>^[ \t]*@[\w.]+)/,
    /(?<number>\b(?:0[xX][\da-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:[eE][+-]?\d+)?[jJ]?)\b)/,
    /(?<name>[A-Za-z_\u00c0-\uffff][\w\u00c0-\uffff]*)/,
  ]
    .map((part) => part.source)
    .join("|"),
  "gmu",
);

/** The highlighted code as a DocumentFragment. */
export function highlight(code) {
  const fragment = document.createDocumentFragment();
  let last = 0;
  let previous = "";
  TOKEN.lastIndex = 0;
  for (let match; (match = TOKEN.exec(code)); ) {
    if (match[0] === "") {
      TOKEN.lastIndex += 1;
      continue;
    }
    if (match.index > last) fragment.append(code.slice(last, match.index));
    const kind = kindOf(match.groups, previous, code, TOKEN.lastIndex);
    if (kind === "string" && /^[rRbBuU]?[fF]/.test(match[0])) {
      fragment.append(fString(match[0]));
    } else {
      fragment.append(kind ? span(kind, match[0]) : match[0]);
    }
    if (match.groups.name) previous = match[0];
    else if (!match.groups.comment) previous = "";
    last = TOKEN.lastIndex;
  }
  if (last < code.length) fragment.append(code.slice(last));
  return fragment;
}

function kindOf(groups, previous, code, end) {
  if (groups.comment) return "comment";
  if (groups.string) return "string";
  if (groups.decorator) return "decorator";
  if (groups.number) return "number";
  const word = groups.name;
  if (previous === "def") return "function";
  if (previous === "class") return "class";
  if (SOFT_KEYWORDS.has(word)) return softKeyword(code, end) ? "keyword" : null;
  if (KEYWORDS.has(word)) return "keyword";
  if (CONSTANTS.has(word)) return "constant";
  if (BUILTINS.has(word)) return "builtin";
  return null;
}

/** `match x:` / `case y:` / `type X = …` are keywords only where a statement starts. */
function softKeyword(code, end) {
  const lineStart = code.lastIndexOf("\n", end - 1) + 1;
  const before = code.slice(lineStart, end).trimStart();
  const after = code.slice(end, code.indexOf("\n", end) < 0 ? undefined : code.indexOf("\n", end));
  return /^\w+$/.test(before) && /^\s+[^\s=.(),:]/.test(after);
}

/** An f-string: string spans around its {fields} (doubled braces are text). */
function fString(text) {
  const fragment = document.createDocumentFragment();
  let start = 0;
  let depth = 0;
  let piece = "";
  for (let i = 0; i < text.length; i += 1) {
    const ch = text[i];
    if (depth === 0 && (ch === "{" || ch === "}") && text[i + 1] === ch) {
      piece += ch + ch;
      i += 1;
    } else if (ch === "{") {
      if (depth === 0) {
        fragment.append(span("string", piece));
        piece = "";
        start = i;
      }
      depth += 1;
    } else if (ch === "}" && depth > 0) {
      depth -= 1;
      if (depth === 0) fragment.append(span("interp", text.slice(start, i + 1)));
    } else if (depth === 0) {
      piece += ch;
    }
  }
  if (depth > 0) piece += text.slice(start);
  if (piece) fragment.append(span("string", piece));
  return fragment;
}

function span(kind, text) {
  const element = document.createElement("span");
  element.className = `tok-${kind}`;
  element.textContent = text;
  return element;
}
