"""Build agents and teams from a validated config; look them up by id."""

from __future__ import annotations

import re
from collections.abc import Iterator

from a2a.types import AgentSkill

from ranch.agents.base import Agent, AgentInfo
from ranch.agents.echo import EchoAgent
from ranch.agents.loader import PythonAgent, import_entry, resolve_runner
from ranch.agents.remote import RemoteAgent
from ranch.agents.rules import Rule, RulesAgent
from ranch.config import (
    AgentConfig,
    EchoAgentConfig,
    PythonAgentConfig,
    RanchConfig,
    RemoteAgentConfig,
    RulesAgentConfig,
    TeamConfig,
)
from ranch.exceptions import AgentNotFound
from ranch.routing import extension
from ranch.routing.team import Team
from ranch.wire.client import ClientPool


class Registry:
    """Every agent and team of one config, built once and shared."""

    def __init__(self, config: RanchConfig, pool: ClientPool) -> None:
        self.config = config
        self.pool = pool
        self._agents: dict[str, Agent] = {}
        for agent_config in config.agents:
            self._agents[agent_config.id] = build_agent(agent_config, pool)
        pending = {team.id: team for team in config.teams}
        while pending:  # members first; `ranch check` already rejected cycles
            ready = [t for t in pending.values() if all(m in self._agents for m in t.members)]
            for team_config in ready:
                self._agents[team_config.id] = build_team(team_config, self._agents)
                del pending[team_config.id]

    def add(self, agent: Agent) -> None:
        """Serve one more agent or team (registered over the hub's API)."""
        self._agents[agent.id] = agent

    async def remove(self, agent_id: str) -> None:
        agent = self._agents.pop(agent_id, None)
        if agent is not None:
            await agent.aclose()

    def get(self, agent_id: str) -> Agent:
        try:
            return self._agents[agent_id]
        except KeyError:
            raise AgentNotFound(agent_id, list(self._agents)) from None

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._agents

    def __iter__(self) -> Iterator[Agent]:
        return iter(self._agents.values())

    def ids(self) -> list[str]:
        return list(self._agents)

    async def aclose(self) -> None:
        for agent in self._agents.values():
            await agent.aclose()


def build_agent(config: AgentConfig, pool: ClientPool) -> Agent:
    """One agent of any kind, with its per-hop limits applied."""
    info = AgentInfo(
        id=config.id,
        name=config.display_name,
        description=config.description,
        skills=[_skill(s.id, s.name, s.description, s.tags, s.examples) for s in config.skills],
    )
    agent: Agent
    if isinstance(config, RulesAgentConfig):
        info.extensions = [extension.declaration()]
        rules = [
            Rule(re.compile(r.match) if r.match is not None else None, r.reply, r.route, r.reason)
            for r in config.rules
        ]
        agent = RulesAgent(info, rules)
    elif isinstance(config, EchoAgentConfig):
        agent = EchoAgent(info)
    elif isinstance(config, RemoteAgentConfig):
        agent = RemoteAgent(info, config.url, pool, config.headers, config.card_ttl)
    elif isinstance(config, PythonAgentConfig):
        if config.client_routing:
            info.extensions = [extension.declaration()]
        runner = resolve_runner(config.id, import_entry(config.id, config.entry), config.options)
        agent = PythonAgent(info, runner)
    else:  # pragma: no cover - the config union is exhaustive
        raise TypeError(f"unknown agent config {type(config).__name__}")
    agent.history_length = config.history_length
    agent.timeout = config.timeout
    agent.require_extensions = tuple(config.require_extensions)
    return agent


def build_team(config: TeamConfig, agents: dict[str, Agent]) -> Team:
    return Team(
        id=config.id,
        name=config.display_name,
        description=config.description,
        members={member: agents[member] for member in config.members},
        default_agent=config.default_agent,
        max_hops=config.max_hops,
        on_invalid_recipient=config.on_invalid_recipient,
        routes=config.routes,
        history_length=config.history_length,
        timeout=config.timeout,
        require_extensions=tuple(config.require_extensions),
    )


def _skill(skill_id: str, name: str, description: str, tags: list[str], examples: list[str]) -> AgentSkill:
    return AgentSkill(id=skill_id, name=name, description=description or name, tags=tags, examples=examples)
