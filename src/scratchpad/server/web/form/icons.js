// The form's icons as inline SVG built here (a form names its logo; it is never a URL).

const NS = "http://www.w3.org/2000/svg";

// name -> the SVG shapes of a 24×24 stroked icon: [tag, attributes]
const SHAPES = {
  key: [
    ["circle", { cx: 7.5, cy: 15.5, r: 4.5 }],
    ["path", { d: "M10.7 12.3 20 3M16 7l3 3M14 9l2 2" }],
  ],
  database: [
    ["ellipse", { cx: 12, cy: 5, rx: 8, ry: 3 }],
    ["path", { d: "M4 5v14c0 1.7 3.6 3 8 3s8-1.3 8-3V5M4 12c0 1.7 3.6 3 8 3s8-1.3 8-3" }],
  ],
  cloud: [["path", { d: "M7 18h10.5a4.5 4.5 0 0 0 .6-9A6 6 0 0 0 6.3 10.2 4 4 0 0 0 7 18z" }]],
  lock: [
    ["rect", { x: 4.5, y: 10.5, width: 15, height: 10, rx: 2 }],
    ["path", { d: "M8 10.5V7a4 4 0 0 1 8 0v3.5" }],
  ],
  plug: [["path", { d: "M9 2v5M15 2v5M6 7h12v4a6 6 0 0 1-12 0zM12 17v5" }]],
  check: [["path", { d: "M4.5 12.5l5 5L19.5 7" }]],
  close: [["path", { d: "M6 6l12 12M18 6 6 18" }]],
};

/** The icon `name` (unknown names: the key) as an `<svg>` element. */
export function icon(name, className = "fp-icon") {
  const svg = document.createElementNS(NS, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("class", className);
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("fill", "none");
  svg.setAttribute("stroke", "currentColor");
  svg.setAttribute("stroke-width", "1.8");
  svg.setAttribute("stroke-linecap", "round");
  svg.setAttribute("stroke-linejoin", "round");
  svg.dataset.icon = Object.hasOwn(SHAPES, name) ? name : "key";
  for (const [tag, attributes] of SHAPES[svg.dataset.icon]) {
    const shape = document.createElementNS(NS, tag);
    for (const [key, value] of Object.entries(attributes)) shape.setAttribute(key, value);
    svg.append(shape);
  }
  return svg;
}
