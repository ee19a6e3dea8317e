// One room, live: the message log, the composer with @mention completion, each agent's
// status, and every team turn drawn as a sequence diagram.
//
// History comes from GET /rooms/{id}/events (the same frames the WebSocket sends), then the
// WebSocket carries on from the room's last cursor; both go through `apply`.

import { all, api, fileBlob, isHubFile, path, session } from "../api.js";
import { focusHeading, h, replace, timeEl } from "../dom.js";
import { LiveSocket } from "../live.js";
import { MentionCompleter } from "../mentions.js";
import { offerReplay } from "../replay.js";
import { RouteBook, renderRouteDiagram, routeText } from "../route-diagram.js";

const MENTION = /(@[a-z0-9][a-z0-9_-]*)/i;
const TOOL_TYPES = new Set(["tool_call", "tool_result"]);
const MAX_TURNS_SHOWN = 20;
const STATUS_MARK = {
  ready: "●",
  working: "◐",
  submitted: "○",
  "input-required": "?",
  handoff: "⇢",
  failed: "✕",
  completed: "✓",
  canceled: "–",
  idle: "○",
};

export async function roomPage(root, ctx) {
  const [roomId] = ctx.params;
  const status = h("p.muted", { role: "status" }, "Loading the room…");
  root.append(status);
  let room;
  try {
    room = await api(`/rooms/${encodeURIComponent(roomId)}`, { signal: ctx.signal });
  } catch (error) {
    if (error.status !== 404) throw error;
    ctx.setTitle("Unknown room");
    root.replaceChildren(h("h1", { tabindex: "-1" }, "Unknown room"),
      h("p", {}, `There is no room “${roomId}” you take part in. `, h("a", { href: "/" }, "See your rooms")));
    focusHeading(root);
    return undefined;
  }
  const [participants, agents, executions] = await Promise.all([
    all(`/rooms/${encodeURIComponent(roomId)}/participants`, { signal: ctx.signal }).catch(() => []),
    all("/agents", { signal: ctx.signal }).catch(() => []),
    api(`/rooms/${encodeURIComponent(roomId)}/executions`, { signal: ctx.signal }).then(items).catch(() => []),
  ]);
  status.remove();
  const view = new RoomView(root, ctx, room, participants, agents);
  for (const execution of [...executions].reverse()) view.setStatus(execution); // newest last wins
  const history = await all(`/rooms/${encodeURIComponent(roomId)}/events`, { since: 0, signal: ctx.signal });
  for (const frame of history) view.apply(frame);
  view.settle();
  const live = new LiveSocket({
    key: session.key,
    rooms: { [roomId]: view.cursor },
    onEvent: (frame) => view.apply(frame),
    onState: ctx.setLive,
  });
  live.connect();
  window.ranchLive = live; // a handle for the browser tests (and for a curious console)
  return () => {
    live.close();
    if (window.ranchLive === live) delete window.ranchLive;
  };
}

function safeParse(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

const PREVIEWED = new Set(["image/png", "image/jpeg", "image/gif", "image/webp"]);

/** A file or data part of a message: a download link (an image shown inline), or collapsed JSON. */
function partView(part) {
  if ("data" in part) {
    return h("details.msg-data", {}, h("summary", {}, "data"), h("pre", {}, JSON.stringify(part.data, null, 2)));
  }
  const type = (part.mediaType ?? "application/octet-stream").toLowerCase();
  if (isHubFile(part.url)) return hubFileView(part, type, part.filename || "file");
  const name = part.filename || (part.url ? part.url.split("/").pop() : "") || "file";
  // a link only, and only to http(s): the page never loads what a message points at
  const safe = /^https?:\/\//i.test(part.url ?? "");
  const link = safe ? h("a", { href: part.url, target: "_blank", rel: "noopener noreferrer" }, name) : h("code", {}, name);
  return h("p.msg-file", {}, link, h("span.muted", {}, ` ${type}`));
}

/** A file whose bytes the hub keeps: fetched with the key (the link needs the header) when clicked,
 * or at once for an image shown inline. */
function hubFileView(part, type, name) {
  const note = h("span.muted", {}, ` ${type}, ${sizeText(part.size ?? 0)}`);
  const download = h("a", { href: "#", download: name }, name);
  download.addEventListener("click", async (event) => {
    if (download.dataset.ready) return; // the bytes are here: the browser saves them
    event.preventDefault();
    try {
      // typed as plain bytes, so the browser never opens it as a page of this origin; released a
      // minute later, so a long room keeps no copies of its files
      const blob = await fileBlob(part.url);
      download.href = URL.createObjectURL(new Blob([blob], { type: "application/octet-stream" }));
      download.dataset.ready = "yes";
      download.click();
      setTimeout(() => {
        URL.revokeObjectURL(download.href);
        download.href = "#";
        delete download.dataset.ready;
      }, 60_000);
    } catch (error) {
      note.textContent = ` ${type}: could not be fetched (${error.message})`;
    }
  });
  let image = null;
  if (PREVIEWED.has(type)) {
    image = h("img", { alt: name });
    fileBlob(part.url)
      .then((blob) => {
        const url = URL.createObjectURL(blob);
        image.addEventListener("load", () => URL.revokeObjectURL(url), { once: true });
        image.src = url;
      })
      .catch(() => image.remove());
  }
  return h("figure.msg-file", {}, image, h("figcaption", {}, download, note));
}

/** A chosen file as an A2A file part (its bytes base64-encoded). */
function filePart(file) {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => {
      const url = String(reader.result);
      resolve({ raw: url.slice(url.indexOf(",") + 1), filename: file.name, mediaType: file.type || "application/octet-stream" });
    };
    reader.onerror = () => reject(reader.error ?? new Error("cannot read the file"));
    reader.readAsDataURL(file);
  });
}

function sizeText(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MB`;
}

function items(data) {
  return Array.isArray(data) ? data : data?.items ?? [];
}

class RoomView {
  constructor(root, ctx, room, participants, agents) {
    this.ctx = ctx;
    this.room = room;
    this.participants = participants;
    this.agents = new Map(agents.map((a) => [a.id, a]));
    this.messages = new Map(); // message id -> <li>
    this.streams = new Map(); // "execution:agent" -> <li>
    this.statuses = new Map(); // agent id -> execution
    this.executions = new Map(); // execution id -> execution (a handoff's child, looked up by its id)
    this.book = new RouteBook();
    this.figures = new Map(); // turn key -> <figure>
    this.cursor = 0;
    this.build(root);
  }

  // -- layout ------------------------------------------------------------------------------

  build(root) {
    const { room } = this;
    this.ctx.setTitle(room.title || room.id);
    this.log = h("ol.messages#messages", {
      role: "log",
      "aria-live": "polite",
      "aria-relevant": "additions",
      "aria-labelledby": "messages-title",
      tabindex: "0",
    });
    this.empty = h("p.muted.empty", {}, "No messages yet. Say hello, or mention an agent with @.");
    this.chips = h("ul.chips", { "aria-labelledby": "agents-title" });
    this.routes = h("div.routes");
    this.noRoutes = h("p.muted", {}, "When a team works on a message, its route appears here, hop by hop.");
    root.append(
      h(
        "div.room",
        {},
        h(
          "section.conversation",
          { "aria-labelledby": "room-title" },
          h(
            "div.room-head",
            {},
            h("h1#room-title", { tabindex: "-1" }, room.title || room.id),
            h(
              "p.card-meta",
              {},
              h("span", {}, `#${room.id}`),
              room.default_agent ? h("span", {}, "answers: ", this.agentLink(room.default_agent)) : null,
              h("span", { class: `badge badge--${room.status}` }, room.status),
            ),
          ),
          h("h2#messages-title.visually-hidden", {}, "Messages"),
          this.empty,
          this.log,
          this.composer(),
        ),
        h(
          "aside.activity",
          { "aria-label": "Agent activity" },
          h("section", { "aria-labelledby": "agents-title" }, h("h2#agents-title", {}, "Agents"), this.chips),
          h("section", { "aria-labelledby": "routes-title" }, h("h2#routes-title", {}, "Team turns"),
            this.noRoutes, this.routes),
        ),
      ),
    );
    this.renderChips();
    focusHeading(root);
  }

  composer() {
    const input = h("textarea#composer-input", {
      name: "text",
      rows: "2",
      autocomplete: "off",
      "aria-describedby": "composer-hint",
      placeholder: "Message the room…",
    });
    const list = h("ul.mentions#composer-mentions");
    const announce = h("p.visually-hidden", { role: "status" });
    this.error = h("p.form-error", { role: "alert" });
    this.input = input;
    this.send = h("button.button", { type: "submit" }, "Send");
    this.file = h("input#composer-file.visually-hidden", { type: "file", name: "file" });
    this.attached = h("span.attached", { role: "status" });
    this.file.addEventListener("change", () => {
      const chosen = this.file.files?.[0];
      this.attached.textContent = chosen ? `Attached: ${chosen.name} (${sizeText(chosen.size)})` : "";
    });
    this.completer = new MentionCompleter(input, list, announce, () => this.mentionable());
    const form = h(
      "form.composer",
      { "aria-label": "Post a message" },
      h("label", { for: "composer-input" }, "Message"),
      h(
        "div.composer-row",
        {},
        h("div.composer-field", {}, list, input),
        h("label.button.button--quiet", { for: "composer-file" }, "Attach a file"),
        this.file,
        this.send,
      ),
      this.attached,
      h("p.hint#composer-hint", {}, "Type @ to mention an agent or team. Enter sends; Shift+Enter starts a new line."),
      announce,
      this.error,
    );
    input.addEventListener("keydown", (event) => {
      if (this.completer.keydown(event)) return;
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        form.requestSubmit();
      }
    });
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.post();
    });
    return form;
  }

  async post() {
    const text = this.input.value.trim();
    const file = this.file.files?.[0];
    if (!text && !file) return;
    this.send.disabled = true;
    this.error.textContent = "";
    try {
      const body = text ? { text } : {};
      if (file) body.parts = [await filePart(file)];
      const message = await api(`/rooms/${encodeURIComponent(this.room.id)}/messages`, {
        method: "POST",
        body,
      });
      this.input.value = "";
      this.file.value = "";
      this.attached.textContent = "";
      if (message?.id) this.addMessage(message, { mine: true });
    } catch (failure) {
      this.error.textContent = `Not sent: ${failure.message}`;
    } finally {
      this.send.disabled = false;
      this.input.focus();
    }
  }

  /** Agents and teams of the room (and its default agent), for @mention completion. */
  mentionable() {
    const ids = new Set(this.participants.filter((p) => p.kind !== "user").map((p) => p.id));
    if (this.room.default_agent) ids.add(this.room.default_agent);
    if (ids.size === 0) for (const id of this.agents.keys()) ids.add(id);
    return [...ids].sort().map((id) => {
      const agent = this.agents.get(id);
      const participant = this.participants.find((p) => p.id === id);
      return { id, name: agent?.name ?? participant?.name ?? id, kind: agent?.kind === "team" ? "team" : "agent" };
    });
  }

  nameOf(sender) {
    if (!sender) return "?";
    if (sender.kind === "user" && sender.id === this.ctx.me?.id) return "You";
    return this.agents.get(sender.id)?.name ?? this.participants.find((p) => p.id === sender.id)?.name ?? sender.id;
  }

  agentLink(id) {
    return this.agents.has(id) ? h("a", { href: path.agent(id) }, `@${id}`) : `@${id}`;
  }

  // -- events ------------------------------------------------------------------------------

  apply(frame) {
    if (typeof frame.cursor === "number") {
      if (frame.cursor <= this.cursor) return;
      this.cursor = frame.cursor;
    }
    const data = frame.data ?? {};
    switch (frame.type) {
      case "message.created":
        return this.addMessage(data);
      case "message.delta":
        return this.addDelta(data);
      case "execution.updated":
        return this.setStatus(data);
      case "routing.decided":
        return this.addHop(data, frame.at);
      case "participant.joined":
        this.participants = [...this.participants.filter((p) => !(p.kind === data.kind && p.id === data.id)), data];
        return this.renderChips();
      case "participant.left":
        this.participants = this.participants.filter((p) => !(p.kind === data.kind && p.id === data.id));
        return this.renderChips();
      default:
        return undefined;
    }
  }

  /** After the history is drawn: start at the newest message. */
  settle() {
    this.log.scrollTop = this.log.scrollHeight;
  }

  appendToLog(li) {
    const atBottom = this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 48;
    this.log.append(li);
    this.empty.hidden = true;
    if (atBottom) this.log.scrollTop = this.log.scrollHeight;
  }

  addMessage(message, { mine = false } = {}) {
    if (!message?.id || this.messages.has(message.id)) return;
    const bubble = this.takeStream(message);
    if (TOOL_TYPES.has(message.type)) {
      bubble?.remove();
      this.messages.set(message.id, this.addTool(message));
      return;
    }
    const li = this.messageItem(message, mine);
    this.messages.set(message.id, li);
    if (bubble) bubble.replaceWith(li);
    else this.appendToLog(li);
  }

  messageItem(message, mine) {
    const sender = message.sender ?? {};
    const own = mine || (sender.kind === "user" && sender.id === this.ctx.me?.id);
    const classes = ["msg", `msg--${message.type ?? "text"}`, `msg--from-${sender.kind ?? "user"}`];
    if (own) classes.push("msg--mine");
    return h(
      "li",
      { class: classes.join(" "), dataset: { id: message.id, cursor: message.cursor ?? "", sender: sender.id ?? "" } },
      this.head(sender, message),
      message.text ? h("p.msg-text", {}, this.withMentions(message.text)) : null,
      (message.parts ?? []).filter((part) => !("text" in part)).map((part) => partView(part)),
      this.hopNote(message),
      this.approval(message),
    );
  }

  /** A team waiting for a person's approval of a hop: Approve / Deny answer it in the room. */
  approval(message) {
    const asked = message.metadata?.["ranch.approval"];
    if (!asked || message.sender?.kind !== "team") return null;
    const team = message.sender.id;
    const answer = async (word, buttons) => {
      for (const button of buttons) button.disabled = true;
      try {
        await api(`/rooms/${encodeURIComponent(this.room.id)}/messages`, {
          method: "POST",
          body: { text: `@${team} ${word}` },
        });
      } catch (failure) {
        for (const button of buttons) button.disabled = false;
        this.error.textContent = `Not sent: ${failure.message}`;
      }
    };
    const approve = h("button.button", { type: "button" }, "Approve");
    const deny = h("button.button.button--quiet", { type: "button" }, "Deny");
    approve.addEventListener("click", () => answer("approve", [approve, deny]));
    deny.addEventListener("click", () => answer("deny", [approve, deny]));
    return h("p.msg-approval", { "aria-label": `Approve sending to ${asked.member}?` }, approve, " ", deny);
  }

  head(sender, message) {
    // names and mentions in the log are text, not links: the log stays one stop for the Tab key
    // (each agent's page is a link in the Agents list beside it)
    const note = { thought: "thinking", error: "error", task: "task" }[message.type];
    return h(
      "p.msg-head",
      {},
      h("span.msg-who", {}, this.nameOf(sender)),
      sender.kind === "team" ? h("span.badge", {}, "team") : null,
      note ? h("span.badge", { class: `badge badge--${message.type}` }, note) : null,
      timeEl(message.created_at),
    );
  }

  /** A team member's reply says where the Router sent it next. */
  hopNote(message) {
    const hop = message.metadata?.["ranch.hop"];
    if (!hop?.recipient) return null;
    const to = hop.recipient === "sender" ? hop.sender : hop.recipient;
    return h("p.msg-hop", {}, `→ ${to}`, hop.reason ? ` · ${hop.reason}` : "");
  }

  withMentions(text) {
    return text.split(MENTION).map((part, i) => (i % 2 === 0 ? part : h("span.mention", {}, part)));
  }

  /** Tool calls and results fold into one collapsed group per run of them. */
  addTool(message) {
    const sender = message.sender ?? {};
    const key = `${message.execution_id ?? ""}:${sender.id ?? ""}`;
    let group = this.log.lastElementChild;
    if (!group?.classList.contains("tool-group") || group.dataset.key !== key) {
      group = h(
        "li.tool-group",
        { dataset: { key } },
        h("details", {}, h("summary", {}), h("ol.tool-steps")),
      );
      this.appendToLog(group);
    }
    const steps = group.querySelector(".tool-steps");
    steps.append(this.toolStep(message));
    const count = steps.childElementCount;
    replace(group.querySelector("summary"), `${this.nameOf(sender)} used tools · ${count} step${count === 1 ? "" : "s"}`);
    return group;
  }

  toolStep(message) {
    const meta = message.metadata ?? {};
    const data = meta.data ?? meta;
    const name = data.name ?? data.tool ?? data.tool_name ?? "";
    const label = message.type === "tool_call" ? "Call" : "Result";
    const detail = Object.keys(data).length ? JSON.stringify(data, null, 2) : "";
    const text = message.text ?? "";
    const same = detail && text.trim() && JSON.stringify(safeParse(text), null, 2) === detail;
    return h(
      "li",
      { class: `tool-step tool-step--${message.type}`, dataset: { id: message.id } },
      h("p.msg-head", {}, h("span.badge", {}, label), name ? h("code", {}, name) : null, timeEl(message.created_at)),
      text ? h("pre", {}, text) : null,
      detail && !same ? h("pre.muted", {}, detail) : null,
    );
  }

  addDelta(data) {
    const key = `${data.execution_id}:${data.agent}`;
    let bubble = this.streams.get(key);
    if (!bubble) {
      bubble = h(
        "li.msg.msg--text.msg--from-agent.msg--streaming",
        { "aria-busy": "true", dataset: { execution: data.execution_id ?? "", sender: data.agent ?? "" } },
        h("p.msg-head", {}, h("span.msg-who", {}, this.nameOf({ kind: "agent", id: data.agent })),
          h("span.badge", {}, "writing…")),
        h("p.msg-text"),
      );
      this.streams.set(key, bubble);
      this.appendToLog(bubble);
    }
    // as in A2A artifact updates: `append: false` starts the text over (e.g. the whole answer
    // replacing its pieces); absent or true adds to it
    const text = bubble.querySelector(".msg-text");
    if (data.append === false) text.textContent = data.text ?? "";
    else text.append(data.text ?? "");
    if (this.log.scrollHeight - this.log.scrollTop - this.log.clientHeight < 96) {
      this.log.scrollTop = this.log.scrollHeight;
    }
  }

  /** The streaming bubble the final message replaces, if any. */
  takeStream(message) {
    if (!message.execution_id) return null;
    const key = `${message.execution_id}:${message.sender?.id}`;
    const bubble = this.streams.get(key);
    if (bubble) this.streams.delete(key);
    return bubble ?? null;
  }

  setStatus(execution) {
    if (!execution?.agent_id) return;
    this.executions.set(execution.id, execution);
    this.statuses.set(execution.agent_id, execution);
    if (!["submitted", "working"].includes(execution.status)) {
      // the final message has come (or never will): drop what is left of its stream
      for (const [key, bubble] of this.streams) {
        if (key.startsWith(`${execution.id}:`)) {
          bubble.remove();
          this.streams.delete(key);
        }
      }
    }
    this.renderChips();
  }

  renderChips() {
    const ids = [];
    for (const p of this.participants) if (p.kind !== "user" && !ids.includes(p.id)) ids.push(p.id);
    for (const id of this.statuses.keys()) if (!ids.includes(id)) ids.push(id);
    if (ids.length === 0) {
      replace(this.chips, h("li.muted", {}, "No agents in this room yet."));
      return;
    }
    replace(this.chips, ids.map((id) => this.chip(id)));
  }

  chip(id) {
    const execution = this.statuses.get(id);
    const state = execution?.status ?? "idle";
    const name = this.agents.get(id)?.name ?? id;
    return h(
      "li",
      { class: `chip chip--${state}`, dataset: { agent: id, status: state } },
      h("span.chip-mark", { "aria-hidden": "true" }, STATUS_MARK[state] ?? "●"),
      this.agents.has(id) ? h("a.chip-name", { href: path.agent(id) }, name) : h("span.chip-name", {}, name),
      h("span.chip-state", {}, state),
      state === "failed" && execution.reason ? h("span.chip-reason", {}, execution.reason) : null,
      this.handoffTree(execution),
      this.handedBy(execution),
    );
  }

  /** Whose work an execution does, while it does it: "for lead". */
  handedBy(execution) {
    const parent = this.executions.get(execution?.parent_execution_id);
    if (!parent || ["completed", "failed", "canceled"].includes(execution.status)) return null;
    return h("span.chip-reason.chip-for", {}, `for ${this.agents.get(parent.agent_id)?.name ?? parent.agent_id}`);
  }

  /** Who an execution waits on, child after child: "→ helper · working" (a chain: each link). */
  handoffTree(execution) {
    const links = [];
    const seen = new Set();
    let child = execution?.status === "handoff" ? this.executions.get(execution.handoff_to) : undefined;
    while (child && !seen.has(child.id)) {
      seen.add(child.id);
      links.push(h("li", { dataset: { execution: child.id, status: child.status } },
        h("span.chip-handoff-agent", {}, this.agents.get(child.agent_id)?.name ?? child.agent_id), ` · ${child.status}`));
      child = child.status === "handoff" ? this.executions.get(child.handoff_to) : undefined;
    }
    if (execution?.status === "handoff" && links.length === 0 && execution.reason) {
      links.push(h("li", {}, execution.reason));
    }
    return links.length ? h("ol.chip-handoffs", { "aria-label": "handed off to" }, links) : null;
  }

  addHop(data, at) {
    const turn = this.book.add(data, at);
    const labelOf = (name) => (name === "user" ? "user" : name);
    const n = this.book.turns.indexOf(turn) + 1;
    const diagram = renderRouteDiagram(turn, `route-${n}`, labelOf);
    let figure = this.figures.get(turn.key);
    if (!figure) {
      const started = turn.hops[0]?.at;
      figure = h(
        "figure.route",
        { dataset: { turn: turn.key, execution: turn.executionId } },
        h("figcaption", {}, h("span.route-team", {}, `${turn.team ?? "team"} · turn ${n}`), " ", timeEl(started)),
        h("p.route-text", {}),
        h("div.route-scroll"),
      );
      this.figures.set(turn.key, figure);
      this.routes.prepend(figure);
      this.noRoutes.hidden = true;
      while (this.routes.childElementCount > MAX_TURNS_SHOWN) {
        const old = this.routes.lastElementChild;
        this.figures.delete(old.dataset.turn);
        old.remove();
      }
      offerReplay(figure, turn, this.ctx.me);
    }
    figure.querySelector(".route-text").textContent = routeText(turn);
    this.showTrace(figure, data);
    replace(figure.querySelector(".route-scroll"), diagram);
    figure.dataset.done = String(turn.hops.at(-1)?.recipient === "user");
  }

  /** The turn's trace id, a link to it when the server has a `--trace-url`. */
  showTrace(figure, data) {
    if (!data.trace_id || figure.querySelector(".route-trace")) return;
    const label = `trace ${data.trace_id}`;
    const trace = data.trace_url
      ? h("a.route-trace", { href: data.trace_url, target: "_blank", rel: "noopener" }, label)
      : h("code.route-trace", {}, label);
    figure.querySelector("figcaption").append(" ", trace);
  }
}
