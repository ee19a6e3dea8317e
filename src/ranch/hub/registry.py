"""Build agents and teams from a validated config; look them up by id."""

from __future__ import annotations

import re
from collections.abc import Iterator

import anyio
from a2a.types import AgentSkill
from anyio.abc import TaskGroup, TaskStatus

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
    RanchConfig,
    RemoteAgentConfig,
    RulesAgentConfig,
    TeamConfig,
)
from ranch.exceptions import AgentNotFound, ConfigError, Conflict
from ranch.routing import extension
from ranch.routing.team import Team
from ranch.wire.client import ClientPool
from ranch.wire.signing import CardVerifier, load_trusted_keys


class Registry:
    """Every agent and team of one config, built once and shared."""

    def __init__(self, config: RanchConfig, pool: ClientPool, tenant_pool: ClientPool | None = None) -> None:
        self.config = config
        self.pool = pool
        """The operator's: config agents (and the superuser's) may call any address."""
        self.tenant_pool = tenant_pool or pool
        """Organizations' agents: every connection is judged by the URL guard (policy/egress.py)."""
        self._agents: dict[str, Agent] = {}
        self._hosted: dict[str, anyio.Event] = {}
        self._opening: set[str] = set()
        """Ids being hosted right now (their agent is opening): nobody else may host them meanwhile."""
        for agent_config in config.agents:
            self._agents[agent_config.id] = build_agent(agent_config, pool)
        pending = {team.id: team for team in config.teams}
        while pending:  # members first; `ranch check` already rejected cycles
            ready = [t for t in pending.values() if all(m in self._agents for m in t.members)]
            for team_config in ready:
                self._agents[team_config.id] = build_team(team_config, self._agents)
                del pending[team_config.id]

    async def host(self, agent: Agent, group: TaskGroup) -> None:
        """Serve one more agent (registered over the hub's API), opened in a task of its own.

        What an agent holds (an MCP session) lives in anyio cancel scopes, which must be
        exited by the task that entered them: so one task opens it, waits, and closes it.
        An id already served is never taken over (Conflict).
        """
        if agent.id in self._agents or agent.id in self._opening:
            raise Conflict(f"the id '{agent.id}' is already served", "id")
        self._opening.add(agent.id)
        try:
            await self._host(agent, group)
        finally:
            self._opening.discard(agent.id)

    async def _host(self, agent: Agent, group: TaskGroup) -> None:
        stop = anyio.Event()

        async def own(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            try:
                await agent.open()
                task_status.started()
                await stop.wait()
            finally:  # not shielded: the agent's own scopes must be exited from inside this task's
                await agent.aclose()

        await group.start(own)
        self._hosted[agent.id] = stop
        self._agents[agent.id] = agent

    async def remove(self, agent_id: str) -> None:
        agent = self._agents.pop(agent_id, None)
        stop = self._hosted.pop(agent_id, None)
        if stop is not None:
            stop.set()  # its own task closes it
        elif agent is not None:
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

    async def open(self) -> None:
        """Let every agent acquire what it holds (MCP connections); `aclose` releases it."""
        for agent in self._agents.values():
            await agent.open()

    async def aclose(self) -> None:
        for agent_id, agent in self._agents.items():
            if agent_id not in self._hosted:  # hosted agents are closed by their own task
                await agent.aclose()


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
    agent: Agent
    if isinstance(config, RulesAgentConfig):
        info.extensions = [extension.declaration()]
        rules = [
            Rule(_pattern(r.match, f"rules[{i}].match", tenant), r.reply, r.route, r.reason)
            for i, r in enumerate(config.rules)
        ]
        agent = RulesAgent(info, rules)
    elif isinstance(config, EchoAgentConfig):
        agent = EchoAgent(info)
    elif isinstance(config, RemoteAgentConfig):
        verify = _card_verifier(config) if config.verify_card else None
        agent = RemoteAgent(info, config.url, pool, config.headers, config.card_ttl, verify)
    elif isinstance(config, PythonAgentConfig):
        if config.client_routing:
            info.extensions = [extension.declaration()]
        runner = resolve_runner(config.id, import_entry(config.id, config.entry), config.options)
        agent = PythonAgent(info, runner)
    elif isinstance(config, LlmAgentConfig):
        from ranch.agents.llm import build_llm_agent  # the openai client takes ~1 s to import; only when used

        info.extensions = [extension.declaration()]
        agent = build_llm_agent(config, info, pool)
    else:  # pragma: no cover - the config union is exhaustive
        raise TypeError(f"unknown agent config {type(config).__name__}")
    agent.history_length = config.history_length
    agent.timeout = config.timeout
    agent.require_extensions = tuple(config.require_extensions)
    return agent


def _pattern(match: str | None, field: str, tenant: bool) -> Pattern | re.Pattern[str] | None:
    if match is None:
        return None
    return compile_tenant(match, field) if tenant else re.compile(match)


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


def _card_verifier(config: RemoteAgentConfig) -> CardVerifier:
    try:
        return CardVerifier(load_trusted_keys(config.trusted_keys))
    except ValueError as exc:
        raise ConfigError([f"agent '{config.id}': {exc}"]) from exc


def _skill(skill_id: str, name: str, description: str, tags: list[str], examples: list[str]) -> AgentSkill:
    return AgentSkill(id=skill_id, name=name, description=description or name, tags=tags, examples=examples)
