// "Replay against…" on a team turn's route: the turn run again on a config the server's operator
// offers (`ranch serve --replay-config NAME=PATH`), the recorded and the new sequence diagrams side
// by side in a dialog, the first hop where they part marked in both (in colour, and said in each
// caption). The page only names a config: it never sends one (docs/replay.md, "On the page and over
// REST"). The hub replays an execution's last turn, so only the newest turn of each execution
// carries the control.

import { api, ApiError } from "./api.js";
import { h, replace } from "./dom.js";
import { renderRouteDiagram, routeText } from "./route-diagram.js";

let offered = null; // one read of GET /replay/configs per page load: {names} or {refused}
const newest = new Map(); // execution id -> the figure of its newest turn, the one that may be replayed

/** The names of the configs the hub offers; `refused` when the caller may not replay (403). */
function configs() {
  offered ??= api("/replay/configs").then(
    (data) => ({ names: (data?.items ?? []).map((item) => item.name) }),
    (error) => {
      if (error instanceof ApiError && error.status === 403) return { refused: true };
      offered = null; // another failure: the next turn asks again
      throw error;
    },
  );
  return offered;
}

const MAY_REPLAY = new Set(["owner", "admin"]);

/** Add the control to `figure`, the route of `turn`, and take it off the execution's older turns;
 * for owners and admins only (`me`, from GET /me): no one else is asked a 403. */
export async function offerReplay(figure, turn, me) {
  if (me && !MAY_REPLAY.has(me.role)) return;
  newest.set(turn.executionId, figure);
  for (const older of figure.parentElement?.querySelectorAll(".route") ?? []) {
    if (older === figure || older.dataset.execution !== turn.executionId) continue;
    older.querySelector(".route-replay")?.remove();
  }
  let answer;
  try {
    answer = await configs();
  } catch {
    return; // the hub could not say; the route is still shown
  }
  const stale = newest.get(turn.executionId) !== figure; // a newer turn came while the hub answered
  if (answer.refused || stale || !figure.isConnected || figure.querySelector(".route-replay")) return;
  if (answer.names.length === 0) {
    figure.append(h("p.route-replay.muted", {}, "No configs to replay this turn against: the server offers none."));
    return;
  }
  figure.append(control(turn, answer.names));
}

function control(turn, names) {
  const n = Math.random().toString(36).slice(2, 8);
  const options = names.map((name) => h("option", { value: name }, name));
  const config = h(`select#replay-config-${n}`, { name: "config" }, options);
  const mode = h(
    `select#replay-mode-${n}`,
    { name: "mode" },
    h("option", { value: "recorded" }, "recorded: call only changed members"),
    h("option", { value: "live" }, "live: call every member"),
  );
  const run = h("button.button", { type: "submit" }, "Replay");
  const error = h("p.form-error", { role: "alert" });
  const result = h("div.replay-result", { "aria-live": "polite" });
  const form = h(
    "form.replay-form",
    {
      onsubmit: async (event) => {
        event.preventDefault();
        run.disabled = true;
        error.textContent = "";
        replace(result, h("p.muted", {}, "Replaying…"));
        try {
          const body = { task_id: turn.executionId, config: config.value, mode: mode.value };
          const replayed = await api("/replay", { method: "POST", body });
          replace(result, h("p.replay-divergence", {}, replayed.divergence));
          show(replayed, config.value, n);
        } catch (failure) {
          replace(result);
          error.textContent = failure.message;
        } finally {
          run.disabled = false;
        }
      },
    },
    h("label", { for: config.id }, "Config"),
    config,
    h("label", { for: mode.id }, "Members"),
    mode,
    run,
  );
  return h("details.route-replay", {}, h("summary", {}, "Replay against…"), form, error, result);
}

/** The replay in a modal dialog, wide enough for two diagrams side by side; closing removes it. */
function show(replayed, name, n) {
  const title = `replay-${n}-title`;
  const dialog = h(
    "dialog.replay-dialog",
    { "aria-labelledby": title },
    h(
      "div.replay-head",
      {},
      h(`h2#${title}`, {}, `Turn of ${replayed.team} replayed on ${name}`),
      h("button.button.button--quiet", { type: "button", onclick: () => dialog.close() }, "Close"),
    ),
    h("p.muted.replay-input", {}, `input: ${replayed.input}`),
    compared(replayed, name, n),
  );
  dialog.addEventListener("close", () => dialog.remove());
  document.body.append(dialog);
  dialog.showModal();
}

/** The replay's answer (`ranch replay --json`) as two diagrams side by side. */
function compared(replayed, name, n) {
  const at = replayed.divergedAt;
  const old = asTurn(replayed, replayed.old.hops);
  const now = asTurn(replayed, replayed.new.hops);
  const note = [replayed.divergence];
  if (replayed.new.stopped) note.push(`stopped: ${replayed.new.stopped}`);
  if (replayed.new.error) note.push(`failed: ${replayed.new.error}`);
  const called = replayed.called.length ? `called: ${replayed.called.join(", ")}` : "";
  const given = replayed.recorded.length ? `recorded answers given back: ${replayed.recorded.join(", ")}` : "";
  return h(
    "div.replay-compare",
    { dataset: { divergedAt: at ?? "" } },
    h("p.replay-divergence", { role: "status" }, note.join(" · ")),
    h(
      "div.replay-sides",
      {},
      side("recorded", old, at, `replay-${n}-old`),
      side(`on ${name} (${replayed.mode} replay)`, now, at, `replay-${n}-new`),
    ),
    called || given ? h("p.muted.replay-calls", {}, [called, given].filter(Boolean).join(" · ")) : null,
  );
}

function side(title, turn, at, id) {
  const diagram = renderRouteDiagram(turn, id);
  const marked = at ? diagram.querySelector(`g.rd-hop[data-hop="${at}"]`) : null;
  marked?.classList.add("rd-hop--diverged");
  return h(
    "figure.replay-side",
    { dataset: { side: id.endsWith("old") ? "old" : "new" } },
    h("figcaption", {}, title, marked ? h("span.replay-mark", {}, ` · parts at hop ${at}`) : null),
    h("p.route-text", {}, routeText(turn)),
    h("div.route-scroll", {}, diagram),
  );
}

function asTurn(replayed, hops) {
  return { team: replayed.team, hops: hops.map((hop, i) => ({ ...hop, hop: i + 1, at: null })) };
}
