// Team turns as sequence diagrams, built from `routing.decided` events
// ({team, execution_id, agent, sender, recipient, reason, hop, ms, trail?, loop?, tokens?}): a member
// team's own hops (`trail`) show in brackets, a hop the team's loop guard redirected with ⟲.
//
// One event is one hop: `agent` answered a message from `sender`, and the Router sent its
// answer on to `recipient`. A turn is the run of hops of one execution from hop 1 on; its
// diagram has a lifeline for the user and for each agent that appears, the arrow that
// started the turn (sender -> first agent), then one arrow per hop (agent -> recipient)
// labelled with the reason and the hop's time.

import { clockTime, duration, svg } from "./dom.js";

const USER = "user";

/** Collects hops into turns; `add` answers the turn the hop belongs to. */
export class RouteBook {
  constructor() {
    this.turns = [];
    this.current = new Map(); // execution id -> its latest turn
  }

  add(data, at) {
    const executionId = data.execution_id ?? data.team ?? "?";
    const hop = { ...data, at };
    let turn = this.current.get(executionId);
    const last = turn?.hops.at(-1);
    if (!turn || (typeof hop.hop === "number" && typeof last?.hop === "number" && hop.hop <= last.hop)) {
      turn = { key: `${executionId}#${this.turns.length + 1}`, team: data.team, executionId, hops: [] };
      this.turns.push(turn);
      this.current.set(executionId, turn);
    }
    turn.hops.push(hop);
    return turn;
  }
}

/** Where an arrow ends: `sender` is who sent the agent its message. */
function target(hop) {
  if (hop.recipient === "sender") return hop.sender || USER;
  return hop.recipient || USER;
}

/** The arrows of a turn, in order: [{from, to, reason, ms, at, hop}]. */
export function arrows(turn) {
  const out = [];
  const [first] = turn.hops;
  if (first) {
    const opener = first.hop === 1 || first.hop === undefined;
    out.push({
      from: first.sender || USER,
      to: first.agent,
      reason: opener ? `to ${turn.team ?? first.agent}` : "…",
      ms: null,
      at: null,
      hop: 0,
    });
  }
  for (const hop of turn.hops) {
    const inside = hop.trail?.length ? ` [${nested(hop.trail)}]` : "";
    const tokens = typeof hop.tokens === "number" ? ` · ${hop.tokens} tokens` : "";
    const reason = `${hop.loop ? "⟲ " : ""}${hop.reason ?? ""}${inside}${tokens}`;
    out.push({ from: hop.agent, to: target(hop), reason, ms: hop.ms, at: hop.at, hop: hop.hop });
  }
  return out;
}

/** The hops a member team made inside its own hop: "a1 → a2 → a3", nested as deep as teams nest. */
function nested(trail) {
  return trail.map((hop) => (hop.trail?.length ? `${hop.agent} [${nested(hop.trail)}]` : hop.agent)).join(" → ");
}

/** The participants in order of appearance, the user first. */
export function lifelines(turn) {
  const names = [USER];
  for (const arrow of arrows(turn)) {
    for (const name of [arrow.from, arrow.to]) if (name && !names.includes(name)) names.push(name);
  }
  return names;
}

/** "user → triage → researcher → triage → user" */
export function routeText(turn) {
  const list = arrows(turn);
  if (list.length === 0) return "";
  // stop k+1 is hop k's agent: a member team shows the hops it made inside, in brackets
  const stops = list.map((a, k) => {
    const trail = turn.hops[k]?.trail;
    return trail?.length && turn.hops[k].agent === a.to ? `${a.to} [${nested(trail)}]` : a.to;
  });
  return [list[0].from, ...stops].join(" → ");
}

const COL = 132;
const PAD = 16;
const HEAD_Y = 8;
const HEAD_H = 30;
const FIRST_Y = 78;
const ROW = 58;
const TIP = 8;

/** A diagram grows to at most this many times its lifelines' width to show its labels whole. */
const WIDEST = 3;
const REASON_FONT = "600 14px";
const TIME_FONT = "400 13px";

let measure = null;
/** `text`'s width in px in the page's font (`font`: weight and size, as .rd-reason and .rd-time). */
function textWidth(text, font) {
  if (measure === null) {
    const canvas = typeof document === "undefined" ? null : document.createElement("canvas");
    const context = canvas?.getContext("2d") ?? null;
    const family = context ? getComputedStyle(document.body).fontFamily || "sans-serif" : "";
    measure = context ? (t, f) => { context.font = `${f} ${family}`; return context.measureText(t).width; }
      : (t) => t.length * 8.4;
  }
  return measure(text, font);
}

/** Shorten `text` to what fits in `width` px in `font`, with an ellipsis (a label longer than
 * WIDEST allows, a lifeline's name longer than its head). */
function fit(text, width, font = REASON_FONT) {
  if (textWidth(text, font) <= width) return text;
  let cut = text.length;
  while (cut > 6 && textWidth(`${text.slice(0, cut - 1)}…`, font) > width) cut -= 1;
  return `${text.slice(0, cut - 1)}…`;
}

/** Where an arrow's label goes: from its left end rightwards when it fits before `right`, else
 * leftwards from its right end when it fits after `leftEdge`, else from its left end (the diagram
 * is widened for it, `labelsRight`). */
function place(text, x1, x2, right, leftEdge, font = REASON_FONT) {
  const start = Math.min(x1, x2) + 6;
  const end = Math.max(x1, x2) - 6;
  const need = textWidth(text, font);
  if (start + need <= right || need > end - leftEdge) return { x: start, anchor: "start", room: right - start };
  return { x: end, anchor: "end", room: end - leftEdge };
}

/** The x the diagram's labels need to reach, placed by `place` (labels that fit on neither side of
 * their arrow run on to the right, so the diagram is made that wide). */
function labelsRight(list, x) {
  let right = 0;
  for (const arrow of list) {
    const x1 = x(arrow.from);
    const x2 = x(arrow.to);
    const start = x1 === x2 ? x1 + 42 : Math.min(x1, x2) + 6;
    const end = x1 === x2 ? start : Math.max(x1, x2) - 6;
    const need = Math.max(textWidth(label(arrow), REASON_FONT), textWidth(timing(arrow), TIME_FONT));
    if (x1 === x2 || need > end - PAD) right = Math.max(right, start + need);
  }
  return right;
}

function label(arrow) {
  return arrow.hop ? `${arrow.hop}. ${arrow.reason}` : arrow.reason;
}

function timing(arrow) {
  return [duration(arrow.ms), arrow.at ? clockTime(arrow.at) : ""].filter(Boolean).join(" · ");
}

/**
 * The turn as an inline SVG. It scales to its container's width (viewBox), and carries a
 * <title> and <desc> so a screen reader gets the route and every hop as text.
 * @param {string} id  unique per page; the title and desc ids derive from it
 */
export function renderRouteDiagram(turn, id, labelOf = (name) => name) {
  const names = lifelines(turn);
  const list = arrows(turn);
  const x = (name) => PAD + COL / 2 + names.indexOf(name) * COL;
  const lanes = PAD * 2 + names.length * COL;
  const width = Math.ceil(Math.min(lanes * WIDEST, Math.max(lanes, labelsRight(list, x) + PAD)));
  const height = FIRST_Y + list.length * ROW + 6;
  const route = routeText(turn);
  const described = list
    .slice(1)
    .map((a) => `Hop ${a.hop}: ${a.from} to ${a.to}, ${a.reason || "no reason given"}, ${duration(a.ms)}.`)
    .join(" ");

  const parts = [
    svg("title", { id: `${id}-title` }, `Route: ${route}`),
    svg("desc", { id: `${id}-desc` }, described),
  ];
  for (const name of names) {
    const cx = x(name);
    parts.push(
      svg("line", { class: "rd-life", x1: cx, y1: HEAD_Y + HEAD_H, x2: cx, y2: height - 4 }),
      svg("rect", {
        class: name === USER ? "rd-head rd-head--user" : "rd-head",
        x: cx - COL / 2 + 8, y: HEAD_Y, width: COL - 16, height: HEAD_H, rx: 6,
      }),
      svg("text", { class: "rd-name", x: cx, y: HEAD_Y + HEAD_H / 2 + 5, "text-anchor": "middle" },
        fit(labelOf(name), COL - 24, "700 15px")),
    );
  }
  list.forEach((arrow, i) => parts.push(...drawArrow(arrow, i, x, width - PAD)));
  return svg(
    "svg",
    {
      class: "route-diagram",
      viewBox: `0 0 ${width} ${height}`,
      width,
      height,
      role: "img",
      "aria-labelledby": `${id}-title`,
      "aria-describedby": `${id}-desc`,
      dataset: { route },
    },
    parts,
  );
}

/** One arrow, its reason above it and its time below, placed by `place`. */
function drawArrow(arrow, i, x, right) {
  const y = FIRST_Y + i * ROW;
  const x1 = x(arrow.from);
  const x2 = x(arrow.to);
  const group = svg("g", { class: i === 0 ? "rd-hop rd-hop--start" : "rd-hop", dataset: { hop: arrow.hop } });
  const when = timing(arrow);
  const reason = label(arrow);
  if (x1 === x2) {
    // an agent that answered itself: a small loop on its lifeline
    group.append(
      svg("path", { class: "rd-arrow", d: `M${x1} ${y - 10} h36 v20 h-36` }),
      svg("path", { class: "rd-tip", d: `M${x1} ${y + 10} l${TIP} ${-TIP / 2} v${TIP} z` }),
      svg("text", { class: "rd-reason", x: x1 + 42, y: y - 2 }, fit(reason, right - x1 - 42)),
      svg("text", { class: "rd-time", x: x1 + 42, y: y + 15 }, fit(when, right - x1 - 42, TIME_FONT)),
    );
    return [group];
  }
  const dir = x2 > x1 ? 1 : -1;
  const above = place(reason, x1, x2, right, PAD);
  const below = place(when, x1, x2, right, PAD, TIME_FONT);
  group.append(
    svg("line", { class: "rd-arrow", x1, y1: y, x2: x2 - dir * TIP, y2: y }),
    svg("path", { class: "rd-tip", d: `M${x2} ${y} l${-dir * TIP * 1.4} ${-TIP / 1.6} v${TIP * 1.25} z` }),
    svg("text", { class: "rd-reason", x: above.x, y: y - 8, "text-anchor": above.anchor },
      svg("title", {}, arrow.reason), fit(reason, above.room)),
  );
  if (when) {
    group.append(svg("text", { class: "rd-time", x: below.x, y: y + 18, "text-anchor": below.anchor },
      fit(when, below.room, TIME_FONT)));
  }
  return [group];
}
