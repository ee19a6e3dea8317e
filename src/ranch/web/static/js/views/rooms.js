// The rooms the caller takes part in, and a form to open a new one.

import { all, api, path } from "../api.js";
import { focusHeading, h, replace, timeEl } from "../dom.js";

export async function roomsPage(root, ctx) {
  ctx.setTitle("Rooms");
  const list = h("ul.cards", { "aria-labelledby": "rooms-title" });
  const status = h("p.muted", { role: "status" }, "Loading rooms…");
  root.append(h("h1#rooms-title", { tabindex: "-1" }, "Rooms"), status, list);
  focusHeading(root);

  const [rooms, agents] = await Promise.all([
    all("/rooms", { signal: ctx.signal }),
    all("/agents", { signal: ctx.signal }).catch(() => []),
  ]);
  status.textContent = rooms.length === 0 ? "You take part in no rooms yet." : "";
  status.hidden = rooms.length > 0;
  replace(list, rooms.map(roomCard));
  root.append(newRoomForm(ctx, agents));
}

function roomCard(room) {
  return h(
    "li.card",
    {},
    h("h2.card-title", {}, h("a", { href: path.room(room.id) }, room.title || room.id)),
    h(
      "p.card-meta",
      {},
      h("span", {}, `#${room.id}`),
      room.default_agent ? h("span", {}, `answers: @${room.default_agent}`) : null,
      h("span", { class: `badge badge--${room.status}` }, room.status),
      room.created_at ? h("span", {}, "opened ", timeEl(room.created_at)) : null,
    ),
  );
}

function newRoomForm(ctx, agents) {
  const error = h("p.form-error", { role: "alert" });
  const title = h("input#room-title", { name: "title", required: true, autocomplete: "off" });
  const agent = h(
    "select#room-agent",
    { name: "default_agent" },
    h("option", { value: "" }, "none"),
    agents.map((a) => h("option", { value: a.id }, `${a.name || a.id} (${a.kind})`)),
  );
  const form = h(
    "form.panel.new-room",
    { "aria-labelledby": "new-room-title" },
    h("h2#new-room-title", {}, "Open a room"),
    h("div.field", {}, h("label", { for: "room-title" }, "Title"), title),
    h(
      "div.field",
      {},
      h("label", { for: "room-agent" }, "Default agent"),
      agent,
      h("p.hint", {}, "It answers messages that mention no one."),
    ),
    error,
    h("button.button", { type: "submit" }, "Open room"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!title.value.trim()) {
      error.textContent = "Give the room a title.";
      title.focus();
      return;
    }
    const chosen = agents.find((a) => a.id === agent.value);
    const body = { title: title.value.trim() };
    if (chosen) {
      body.default_agent = chosen.id;
      body.participants = [{ kind: chosen.kind === "team" ? "team" : "agent", id: chosen.id }];
    }
    try {
      const room = await api("/rooms", { method: "POST", body });
      ctx.navigate(path.room(room.id));
    } catch (failure) {
      error.textContent = `Could not open the room: ${failure.message}`;
    }
  });
  return form;
}
