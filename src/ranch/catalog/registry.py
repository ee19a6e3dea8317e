"""The agents and teams one hub serves, by id: built once from the config, more hosted as registered."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
from anyio.abc import TaskGroup, TaskStatus

from ranch.agents.base import Agent
from ranch.catalog.build import build_agent, build_team
from ranch.config import (
    RanchConfig,
)
from ranch.db.conversations import ConversationStore
from ranch.exceptions import AgentNotFound, Conflict
from ranch.wire.client import ClientPool


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
        self._state: ConversationStore | None = None
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

    def keep_state(self, store: ConversationStore) -> None:
        """Every agent served, now and later, keeps its conversations in `store`."""
        self._state = store
        for agent in self._agents.values():
            agent.keep_state(store)

    async def _host(self, agent: Agent, group: TaskGroup) -> None:
        if self._state is not None:
            agent.keep_state(self._state)
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
