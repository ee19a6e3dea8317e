// Agents and teams: the list, and one agent's page with its A2A card (skills, capabilities,
// interfaces, extensions; ranch's client-routing extension stands out).

import { all, api, path } from "../api.js";
import { focusHeading, h, replace } from "../dom.js";

export const CLIENT_ROUTING = "https://ranch.woi.dev/extensions/client-routing/v1";

export async function agentsPage(root, ctx) {
  ctx.setTitle("Agents");
  const status = h("p.muted", { role: "status" }, "Loading agents…");
  const results = h("div.agent-groups");
  const skill = h("input#find-skill", { type: "search", name: "skill", autocomplete: "off", maxlength: "200" });
  const tag = h("input#find-tag", { type: "search", name: "tag", autocomplete: "off", maxlength: "200" });
  const find = async (event) => {
    event?.preventDefault();
    const filters = new URLSearchParams();
    if (skill.value.trim()) filters.set("skill", skill.value.trim());
    if (tag.value.trim()) filters.set("tag", tag.value.trim());
    const query = filters.toString();
    const agents = await all(query ? `/agents?${query}` : "/agents", { signal: ctx.signal });
    status.hidden = agents.length > 0;
    status.textContent = agents.length ? "" : query ? "No agent or team matches." : "No agents yet.";
    replace(results, ...groups(agents));
  };
  const form = h(
    "form.find",
    { role: "search", "aria-label": "Find agents", onsubmit: find },
    h("label", { for: "find-skill" }, "Skill"),
    skill,
    h("label", { for: "find-tag" }, "Tag"),
    tag,
    h("button.button", { type: "submit" }, "Find"),
  );
  root.append(h("h1", { tabindex: "-1" }, "Agents and teams"), form, status, results);
  focusHeading(root);
  await find();
}

function groups(agents) {
  const teams = agents.filter((a) => a.kind === "team");
  const others = agents.filter((a) => a.kind !== "team");
  const sections = [];
  for (const [title, group] of [["Teams", teams], ["Agents", others]]) {
    if (group.length === 0) continue;
    const id = `group-${title.toLowerCase()}`;
    sections.push(
      h("section", { "aria-labelledby": id }, h(`h2#${id}`, {}, title), h("ul.cards", {}, group.map(agentCard))),
    );
  }
  return sections;
}

function agentCard(agent) {
  return h(
    "li.card",
    {},
    h("h3.card-title", {}, h("a", { href: path.agent(agent.id) }, agent.name || agent.id)),
    h("p", {}, agent.description || ""),
    h(
      "p.card-meta",
      {},
      h("span", {}, `@${agent.id}`),
      h("span.badge", {}, agent.kind),
      agent.members?.length ? h("span", {}, `members: ${agent.members.join(", ")}`) : null,
    ),
  );
}

async function readCard(agent, signal) {
  if (agent.card_url) {
    try {
      const response = await fetch(agent.card_url, { signal, headers: { Accept: "application/json" } });
      if (response.ok) return await response.json();
    } catch (error) {
      if (signal.aborted) throw error;
    }
  }
  return agent.card ?? null;
}

export async function agentPage(root, ctx) {
  const [id] = ctx.params;
  const status = h("p.muted", { role: "status" }, "Loading…");
  root.append(status);
  let agent;
  try {
    agent = await api(`/agents/${encodeURIComponent(id)}`, { signal: ctx.signal });
  } catch (error) {
    if (error.status !== 404) throw error;
    ctx.setTitle("Unknown agent");
    root.replaceChildren(h("h1", { tabindex: "-1" }, "Unknown agent"),
      h("p", {}, `No agent or team is called “${id}” here. `, h("a", { href: "/agents" }, "See them all")));
    focusHeading(root);
    return;
  }
  const card = await readCard(agent, ctx.signal);
  ctx.setTitle(agent.name || agent.id);
  replace(
    root,
    h("h1", { tabindex: "-1" }, agent.name || agent.id),
    h("p.lead", {}, card?.description || agent.description || ""),
    facts(agent, card),
    members(agent),
    skills(card),
    capabilities(card),
    interfaces(card),
    extensions(card),
    card ? h("details.raw", {}, h("summary", {}, "The whole card (JSON)"), h("pre", {}, JSON.stringify(card, null, 2)))
      : h("p.muted", {}, "The agent card could not be read."),
  );
  focusHeading(root);
}

function row(term, value) {
  if (value === null || value === undefined || value === "") return null;
  return [h("dt", {}, term), h("dd", {}, value)];
}

function facts(agent, card) {
  return h(
    "dl.facts",
    {},
    row("Id", h("code", {}, agent.id)),
    row("Kind", agent.kind),
    row("Model", agent.model),
    row("Visibility", agent.visibility),
    row("External", agent.is_external ? "yes" : null),
    row("History length", agent.history_length),
    row("Version", card?.version),
    row("Provider", card?.provider?.organization),
    row("A2A endpoint", agent.a2a_url ? h("code", {}, agent.a2a_url) : null),
    row("Card", agent.card_url ? h("a", { href: agent.card_url }, "agent-card.json") : null),
  );
}

function members(agent) {
  if (!agent.members?.length) return null;
  return h(
    "section",
    { "aria-labelledby": "members-title" },
    h("h2#members-title", {}, "Members"),
    h("ul.inline-list", {}, agent.members.map((m) => h("li", {}, h("a", { href: path.agent(m) }, `@${m}`)))),
  );
}

function skills(card) {
  const list = card?.skills ?? [];
  return h(
    "section",
    { "aria-labelledby": "skills-title" },
    h("h2#skills-title", {}, "Skills"),
    list.length === 0 ? h("p.muted", {}, "No skills declared.") : h("ul.cards", {}, list.map(skill)),
  );
}

function skill(s) {
  return h(
    "li.card.skill",
    {},
    h("h3.card-title", {}, s.name || s.id, s.name && s.id && s.name !== s.id ? h("span.muted", {}, ` (${s.id})`) : null),
    s.description ? h("p", {}, s.description) : null,
    s.tags?.length ? h("ul.tags", { "aria-label": "Tags" }, s.tags.map((t) => h("li.tag", {}, t))) : null,
    s.examples?.length
      ? [h("p.examples-title", {}, "Examples"), h("ul.examples", {}, s.examples.map((e) => h("li", {}, h("q", {}, e))))]
      : null,
  );
}

function capabilities(card) {
  const caps = card?.capabilities ?? {};
  const yes = (value) => (value ? "yes" : "no");
  return h(
    "section",
    { "aria-labelledby": "capabilities-title" },
    h("h2#capabilities-title", {}, "Capabilities"),
    h(
      "dl.facts",
      {},
      row("Streaming", yes(caps.streaming)),
      row("Push notifications", yes(caps.pushNotifications)),
      row("Extended card", caps.extendedAgentCard === undefined ? null : yes(caps.extendedAgentCard)),
      row("Input", (card?.defaultInputModes ?? []).join(", ")),
      row("Output", (card?.defaultOutputModes ?? []).join(", ")),
    ),
  );
}

function interfaceRows(card) {
  if (card?.supportedInterfaces?.length) {
    return card.supportedInterfaces.map((i) => [i.protocolBinding, i.protocolVersion, i.url, i.tenant]);
  }
  if (!card?.url) return [];
  const extra = (card.additionalInterfaces ?? []).map((i) => [i.transport, card.protocolVersion, i.url, ""]);
  return [[card.preferredTransport ?? "JSONRPC", card.protocolVersion, card.url, ""], ...extra];
}

function interfaces(card) {
  const rows = interfaceRows(card);
  return h(
    "section",
    { "aria-labelledby": "interfaces-title" },
    h("h2#interfaces-title", {}, "Interfaces"),
    rows.length === 0
      ? h("p.muted", {}, "None declared.")
      : h(
        "div.table-scroll",
        { tabindex: "0", role: "region", "aria-labelledby": "interfaces-title" },
        h(
          "table.interfaces",
          {},
          h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Binding"), h("th", { scope: "col" }, "A2A"),
            h("th", { scope: "col" }, "URL"), h("th", { scope: "col" }, "Tenant"))),
          h("tbody", {}, rows.map(([binding, version, url, tenant]) =>
            h("tr", {}, h("td", {}, binding ?? ""), h("td", {}, version ?? ""), h("td", {}, h("code", {}, url ?? "")),
              h("td", {}, tenant ? h("code", {}, tenant) : "")))),
        ),
      ),
  );
}

function extensions(card) {
  const list = card?.capabilities?.extensions ?? [];
  return h(
    "section",
    { "aria-labelledby": "extensions-title" },
    h("h2#extensions-title", {}, "Extensions"),
    list.length === 0
      ? h("p.muted", {}, "None declared.")
      : h("ul.extensions", {}, list.map((ext) => {
        const routing = ext.uri === CLIENT_ROUTING;
        return h(
          routing ? "li.extension.extension--routing" : "li.extension",
          {},
          routing ? h("p.extension-badge", {}, "Client routing") : null,
          h("p", {}, h("code", {}, ext.uri)),
          ext.description ? h("p", {}, ext.description) : null,
          routing
            ? h("p.muted", {}, "This agent takes part in routing: it receives its peers' cards with each message "
              + "and names who answers next.")
            : null,
          ext.required ? h("p", {}, h("span.badge.badge--required", {}, "required")) : null,
        );
      })),
  );
}
