"""A recorded turn run again on a team config: the Router's own code, live or recorded members.

`--live` calls every member. `--recorded` calls a member only when it changed (its config entry
differs from the baseline's, or `--changed` names it) or when the recorded turn never reached it;
every other member is a `RecordedMember`, which gives back its recorded answers in the order it
gave them and never sends its agent a message. When the new route reaches such a member more often
than it was recorded, the replay stops there and says so (`--live` would call it).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from a2a.types import Message, Task, TaskArtifactUpdateEvent, TaskStatus, TaskStatusUpdateEvent
from google.protobuf.json_format import MessageToDict

from ranch.agents.base import Agent, AgentInfo, Call, Event, text_of
from ranch.agents.fold import state_name
from ranch.agents.invoke import invoke
from ranch.catalog.build import build_team
from ranch.catalog.registry import Registry
from ranch.config import RanchConfig
from ranch.exceptions import AgentError
from ranch.ids import new_id
from ranch.replay.changes import team_of
from ranch.replay.compare import Route, diverged_at, divergence
from ranch.replay.recording import ASKED, RecordedHop, RecordedTurn
from ranch.routing.team import Team
from ranch.wire import client_routing, keys
from ranch.wire.client import ClientPool
from ranch.wire.events import COMPLETED, INPUT_REQUIRED, ROLE_AGENT

Mode = Literal["recorded", "live"]


class NoRecording(AgentError):
    """A recorded replay reached an unchanged member more often than the turn did."""


class RecordedMember(Agent):
    """An unchanged member in a recorded replay: its recorded answers, in order; never its agent."""

    def __init__(self, agent: Agent, answers: list[RecordedHop], failure: str | None = None) -> None:
        self.id = agent.id
        self.agent = agent
        self.answers = answers
        self.failure = failure
        """What the member's failure said, when it ended the recorded turn: given back after its answers."""
        self.served: list[RecordedHop] = []
        self.missing: int | None = None
        """The visit it had no recorded answer for (the replay stopped there)."""
        self.history_length = agent.history_length
        self.takes_text = agent.takes_text

    async def info(self) -> AgentInfo:
        """Its agent's own card, so routing members are offered the same peers as before."""
        return await self.agent.info()

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        visit = len(self.served) + 1
        if visit > len(self.answers):
            if self.failure is not None and visit == len(self.answers) + 1:
                raise AgentError(self.id, self.failure)
            self.missing = visit
            raise NoRecording(self.id, f"unchanged, and no recorded answer for its visit {visit}")
        hop = self.answers[visit - 1]
        self.served.append(hop)
        yield recorded_answer(hop, message)


def recorded_answer(hop: RecordedHop, message: Message) -> Task:
    """The member's recorded answer as a task: its reply, decision, cost and inner route."""
    data: dict[str, Any] = {}
    decision = hop.decision()
    if decision is not None:
        data.update(decision.model_dump(by_alias=True, exclude_none=True))
    if hop.tokens is not None:
        data["usage"] = {"totalTokens": hop.tokens}
    if hop.trail:
        data["trail"] = hop.trail
    reply = Message(message_id=new_id(), role=ROLE_AGENT, context_id=message.context_id, parts=hop.parts)
    if data:
        reply.metadata.update({client_routing.URI: data})
        reply.extensions.append(client_routing.URI)
    state = INPUT_REQUIRED if hop.reason == ASKED else COMPLETED
    return Task(id=new_id(), context_id=message.context_id, status=TaskStatus(state=state, message=reply))


@dataclass
class Replayed:
    """A turn replayed: the old route, the new one, and which members were called."""

    turn: RecordedTurn
    mode: Mode
    changed: dict[str, str]
    """Member -> why it was called in a recorded replay (changed, new, named by --changed)."""
    old: Route
    new: Route
    called: list[str] = field(default_factory=list)
    """Members that took a hop live."""
    given_back: list[str] = field(default_factory=list)
    """Members whose recorded answers were given back."""

    def diverged_at(self) -> int | None:
        return diverged_at(self.old, self.new)

    def divergence(self) -> str:
        return divergence(self.old, self.new)

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.turn.task_id,
            "team": self.turn.team,
            "mode": self.mode,
            "input": self.turn.text,
            "changed": self.changed,
            "old": self.old.to_json(),
            "new": self.new.to_json(),
            "divergedAt": self.diverged_at(),
            "divergence": self.divergence(),
            "called": self.called,
            "recorded": self.given_back,
        }


def old_route(turn: RecordedTurn) -> Route:
    hops = [{**hop.to_json(), "reply": hop.text} for hop in turn.hops]
    error = f"agent '{turn.failure[0]}': {turn.failure[1]}" if turn.failure else None
    return Route(hops=hops, state=turn.state, error=error)


async def replay(
    turn: RecordedTurn,
    config: RanchConfig,
    *,
    mode: Mode = "recorded",
    changed: Mapping[str, str] | None = None,
    pool: ClientPool | None = None,
) -> Replayed:
    """Run `turn`'s message through its team as `config` defines it (see the module docstring)."""
    changed = dict(changed or {})
    entry = team_of(config, turn.team, "the config")
    own_pool = pool is None
    pool = pool or ClientPool()
    registry = Registry(config, pool)
    agents: dict[str, Agent] = {agent.id: agent for agent in registry}
    recorded: dict[str, RecordedMember] = {}
    if mode == "recorded":
        for member in entry.members:
            answers = turn.answers(member)
            failed = turn.failure is not None and turn.failure[0] == member
            if member not in changed and (answers or failed):
                failure = turn.failure[1] if failed and turn.failure else None
                recorded[member] = agents[member] = RecordedMember(agents[member], answers, failure)
    team = build_team(entry, agents)
    calling = [agents[member] for member in entry.members if member not in recorded]
    live = list({id(agent): agent for agent in _inside(calling)}.values())  # each agent once
    try:
        for agent in live:
            await agent.open()
        new = await _run(team, turn.message)
    finally:
        for agent in live:
            await agent.aclose()
        if own_pool:
            await pool.aclose()
    _mark(new, recorded)
    called = list(dict.fromkeys(str(hop["agent"]) for hop in new.hops if hop.get("source") == "live"))
    given = list(dict.fromkeys(str(hop["agent"]) for hop in new.hops if hop.get("source") == "recorded"))
    return Replayed(turn, mode, changed, old_route(turn), new, called, given)


async def _run(team: Team, asked: Message) -> Route:
    """The team's answer to a copy of `asked` in a conversation of its own: the route it took."""
    message = Message(message_id=new_id(), role=asked.role, context_id=new_id(), parts=list(asked.parts))
    message.metadata.CopyFrom(asked.metadata)
    replies: dict[int, str] = {}
    final: TaskStatusUpdateEvent | None = None
    async with invoke(team, message, Call()) as events:  # as the hub calls a team: its members in its group
        async for event in events:
            if isinstance(event, TaskArtifactUpdateEvent) and event.last_chunk:
                record = MessageToDict(event.artifact.metadata).get(keys.HOP)
                if isinstance(record, dict) and "hop" in record:
                    replies[int(record["hop"])] = text_of(Message(parts=event.artifact.parts))
            elif isinstance(event, TaskStatusUpdateEvent):
                final = event
    assert final is not None  # a turn always ends with its final status
    routing = MessageToDict(final.metadata).get(client_routing.URI, {})
    hops = [dict(record) for record in routing.get("trail", [])]
    for number, hop in enumerate(hops, 1):
        hop["reply"] = replies.get(number, "")
        for key in ("tokens",):
            if isinstance(hop.get(key), float):
                hop[key] = int(hop[key])
    error = routing.get("error")
    said = str(error["message"]) if isinstance(error, dict) else None
    return Route(hops=hops, state=state_name(final.status.state), error=said)


def _mark(route: Route, recorded: dict[str, RecordedMember]) -> None:
    """Say where each hop came from; a recorded hop keeps the time it took when it was recorded."""
    given: dict[str, Iterator[RecordedHop]] = {member: iter(m.served) for member, m in recorded.items()}
    for hop in route.hops:
        agent = str(hop["agent"])
        if agent in given:
            hop["source"] = "recorded"
            original = next(given[agent], None)
            if original is not None:
                hop["ms"] = original.ms
        else:
            hop["source"] = "live"
    for member in recorded.values():
        if member.missing is not None:
            route.stopped = (
                f"{member.id} is unchanged and has no recorded answer for its visit {member.missing} "
                "(--live calls it)"
            )


def _inside(agents: list[Agent]) -> Iterator[Agent]:
    """The agents and, for member teams, everything inside them: what a live call may reach."""
    for agent in agents:
        yield agent
        if isinstance(agent, Team):
            yield from _inside(list(agent.members.values()))
