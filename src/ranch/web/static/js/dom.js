// Small DOM helpers: build elements without innerHTML, so text from the hub is never parsed as HTML.

/**
 * h("a.link", {href: "/"}, "text", child) — tag with optional .classes and #id, attributes, children.
 * Attributes: `on*` functions become listeners, `dataset` an object, booleans toggle, null/false skip.
 */
export function h(spec, attrs = {}, ...children) {
  const [, tag, rest] = spec.match(/^([a-z0-9-]+)(.*)$/i);
  const el = document.createElement(tag);
  for (const part of rest.match(/[.#][^.#]+/g) ?? []) {
    if (part[0] === ".") el.classList.add(part.slice(1));
    else el.id = part.slice(1);
  }
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

/** The same for SVG elements. */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") el.addEventListener(name.slice(2), value);
    else if (name === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
}

/** Replace everything inside `el`. */
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const clock = new Intl.DateTimeFormat(undefined, {
  hour: "2-digit",
  minute: "2-digit",
  second: "2-digit",
  hourCycle: "h23",
});

/** A <time> element for an ISO string: the local clock time, the full timestamp in `datetime`. */
export function timeEl(iso) {
  if (!iso) return null;
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return null;
  return h("time", { datetime: iso, title: date.toLocaleString() }, clock.format(date));
}

export function clockTime(iso) {
  const date = new Date(iso);
  return Number.isNaN(date.getTime()) ? "" : clock.format(date);
}

/** Milliseconds as people read them: 0.4 ms, 12 ms, 1.3 s. */
export function duration(ms) {
  if (typeof ms !== "number" || !Number.isFinite(ms)) return "";
  if (ms < 10) return `${ms.toFixed(1)} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(1)} s`;
}

/** Move focus to a new view's heading, so keyboard and screen-reader users start there. */
export function focusHeading(root) {
  const heading = root.querySelector("h1");
  if (heading && !root.contains(document.activeElement)) heading.focus({ preventScroll: true });
}
