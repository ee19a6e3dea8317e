"""Agents and teams built from their validated config entries (the file's, or a registration's)."""

from __future__ import annotations

import re

from a2a.types import AgentSkill

from ranch.agents.base import Agent, AgentInfo
from ranch.agents.echo import EchoAgent
from ranch.agents.loader import PythonAgent, import_entry, resolve_runner
from ranch.agents.remote import RemoteAgent
from ranch.agents.rules import Pattern, Rule, RulesAgent, compile_tenant
from ranch.config import (
    AgentConfig,
    EchoAgentConfig,
    LlmAgentConfig,
    PythonAgentConfig,
    RemoteAgentConfig,
    RulesAgentConfig,
    TeamConfig,
)
from ranch.exceptions import ConfigError
from ranch.routing.team import Team
from ranch.wire import client_routing, modes
from ranch.wire.client import ClientPool
from ranch.wire.signing import CardVerifier, load_trusted_keys


def build_agent(config: AgentConfig, pool: ClientPool, *, tenant: bool = False) -> Agent:
    """One agent of any kind, with its per-hop limits applied.

    `tenant`: it was registered over the REST API, so its rules' regexes run on RE2 (linear time);
    the operator's config file keeps Python's `re`.
    """
    info = AgentInfo(
        id=config.id,
        name=config.display_name,
        description=config.description,
        skills=[_skill(s.id, s.name, s.description, s.tags, s.examples) for s in config.skills],
    )
    info.input_modes, info.output_modes = _modes(config)
    agent: Agent
    if isinstance(config, RulesAgentConfig):
        info.extensions = [client_routing.declaration()]
        rules = [
            Rule(_pattern(r.match, f"rules[{i}].match", tenant), r.reply, r.route, r.reason)
            for i, r in enumerate(config.rules)
        ]
        agent = RulesAgent(info, rules)
    elif isinstance(config, EchoAgentConfig):
        agent = EchoAgent(info)
    elif isinstance(config, RemoteAgentConfig):
        verify = _card_verifier(config) if config.verify_card else None
        agent = RemoteAgent(info, config.url, pool, config.headers, config.card_ttl, verify, config.binding)
    elif isinstance(config, PythonAgentConfig):
        if config.client_routing:
            info.extensions = [client_routing.declaration()]
        runner = resolve_runner(config.id, import_entry(config.id, config.entry), config.options)
        configured = (config.input_modes is not None, config.output_modes is not None)
        agent = PythonAgent(info, runner, modes_configured=configured)
    elif isinstance(config, LlmAgentConfig):
        # the openai client takes ~1 s to import: only when used (catalog.records imports it off the loop)
        from ranch.agents.llm import build_llm_agent

        info.extensions = [client_routing.declaration()]
        agent = build_llm_agent(config, info, pool)
    else:  # pragma: no cover - the config union is exhaustive
        raise TypeError(f"unknown agent config {type(config).__name__}")
    agent.takes_text = any(modes.takes(mode, modes.TEXT) for mode in info.input_modes)
    agent.history_length = config.history_length
    agent.timeout = config.timeout
    agent.require_extensions = tuple(config.require_extensions)
    if config.resume is not None:
        agent.resume = config.resume
    return agent


KIND_MODES: dict[type[AgentConfig], tuple[list[str], list[str]]] = {
    EchoAgentConfig: ([modes.ANY], [modes.ANY]),
    LlmAgentConfig: ([modes.TEXT, modes.JSON], [modes.TEXT]),
}
"""Input and output modes of the kinds that take more than text (the others: `text/plain` only).
An llm agent reads data parts as JSON; it sees images when its `input_modes` list an image type
(a vision model). A remote agent's modes are its card's; these are for while it cannot be read."""


def _modes(config: AgentConfig) -> tuple[list[str], list[str]]:
    """The agent's input and output modes: the config's, else its kind's default."""
    given_in, given_out = KIND_MODES.get(type(config), ([modes.TEXT], [modes.TEXT]))
    return list(config.input_modes or given_in), list(config.output_modes or given_out)


def _pattern(match: str | None, field: str, tenant: bool) -> Pattern | re.Pattern[str] | None:
    if match is None:
        return None
    return compile_tenant(match, field) if tenant else re.compile(match)


def build_team(config: TeamConfig, agents: dict[str, Agent]) -> Team:
    team = Team(
        id=config.id,
        name=config.display_name,
        description=config.description,
        members={member: agents[member] for member in config.members},
        default_agent=config.default_agent,
        max_hops=config.max_hops,
        on_invalid_recipient=config.on_invalid_recipient,
        on_loop=config.on_loop,
        loop_repeats=config.loop_repeats,
        loop_cycles=config.loop_cycles,
        on_done=config.on_done,
        budget_tokens=config.budget.tokens if config.budget is not None else None,
        access={member: (rule.allow, rule.deny) for member, rule in config.access.items()},
        approval=tuple(config.approval.members),
        approvers=config.approval.approvers,
        routes=config.routes,
        history_length=config.history_length,
        timeout=config.timeout,
        require_extensions=tuple(config.require_extensions),
    )
    team.takes_text = agents[config.default_agent].takes_text  # it takes what its default agent takes
    return team


def _card_verifier(config: RemoteAgentConfig) -> CardVerifier:
    try:
        return CardVerifier(load_trusted_keys(config.trusted_keys))
    except ValueError as exc:
        raise ConfigError([f"agent '{config.id}': {exc}"]) from exc


def _skill(skill_id: str, name: str, description: str, tags: list[str], examples: list[str]) -> AgentSkill:
    return AgentSkill(id=skill_id, name=name, description=description or name, tags=tags, examples=examples)
