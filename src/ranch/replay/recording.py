"""A recorded team turn, read back from its A2A task: the caller's message, the route, each reply.

The Router keeps a turn's route in the final task's metadata (`metadata[URI].trail`, one record per
hop) and each member's reply as the artifact `hop-{n}-{agent}` (routing/events.py). That is all a
replay needs: the message that started the turn, and what each member said and decided.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from a2a.types import Message, Part, Task, TaskState
from google.protobuf.json_format import MessageToDict, ParseDict

from ranch.agents.base import text_of
from ranch.agents.fold import state_name
from ranch.exceptions import RanchError
from ranch.wire import client_routing, keys
from ranch.wire.client_routing import RoutingDecision
from ranch.wire.events import ROLE_USER

ROUTER_CHOSE = frozenset(
    {
        "static route",
        "default agent answered",
        "end of the pipeline",
        "no decision; back to the default agent",
    }
)
"""Reasons the Router gives when the member decided nothing (routing/router.py, `without_decision`):
such a hop is replayed as an answer with no decision, so the new team's Router chooses again."""
ASKED = "asked for input"
"""The reason of a hop whose member asked the caller something (its task waited for input)."""


class ReplayInputError(RanchError):
    """A task, config or suite that cannot be replayed: said in one line naming what is wrong."""


@dataclass(frozen=True)
class RecordedHop:
    """One hop as recorded: the trail's record and the member's reply."""

    agent: str
    sender: str
    recipient: str
    reason: str
    ms: float = 0.0
    tokens: int | None = None
    parts: list[Part] = field(default_factory=list)
    trail: list[dict[str, Any]] | None = None
    """The hops inside the member, when it is a team."""
    loop: bool = False

    @property
    def text(self) -> str:
        return text_of(Message(parts=self.parts))

    def decision(self) -> RoutingDecision | None:
        """What the member decided, as far as the record tells: the Router's own choices (a static
        route, a fallback, `on_loop`) are left out, so the new team's Router makes them again."""
        reason = self.reason
        if self.loop or reason in ROUTER_CHOSE or reason == ASKED:
            return None
        if reason.startswith("invalid recipient '"):
            return RoutingDecision(recipient=reason.split("'")[1])
        if reason.endswith(" is closed to the caller"):
            return RoutingDecision(recipient=reason.removesuffix(" is closed to the caller"))
        if reason.startswith("to ") and ", outside " in reason:  # a peer of the team's own caller
            named, _, why = reason.removeprefix("to ").partition(", outside ")
            return RoutingDecision(recipient=named, reason=why.partition(": ")[2] or None)
        return RoutingDecision(recipient=self.recipient, reason=reason)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "agent": self.agent,
            "sender": self.sender,
            "recipient": self.recipient,
            "reason": self.reason,
            "ms": self.ms,
        }
        if self.tokens is not None:
            data["tokens"] = self.tokens
        if self.trail:
            data["trail"] = self.trail
        if self.loop:
            data["loop"] = True
        return data


@dataclass(frozen=True)
class RecordedTurn:
    """A team turn as recorded: who it was for, what started it, where it went, how it ended."""

    team: str
    task_id: str
    message: Message
    hops: list[RecordedHop]
    state: str = "completed"
    """How the turn ended: `completed`, `input-required`, `failed` (fold.state_name's words)."""
    failure: tuple[str, str] | None = None
    """(agent, message) of the member whose failure ended the turn, when one did."""

    @property
    def text(self) -> str:
        return text_of(self.message)

    def answers(self, member: str) -> list[RecordedHop]:
        """The member's recorded hops, in the order it gave them."""
        return [hop for hop in self.hops if hop.agent == member]

    def to_json(self) -> dict[str, Any]:
        """The turn as a suite stores it (`ranch eval --record`): plain YAML-able data."""
        data: dict[str, Any] = {"task": self.task_id, "input": self.text, "state": self.state}
        if not _plain_text(self.message.parts):
            data["parts"] = [MessageToDict(part) for part in self.message.parts]
        hops = []
        for hop in self.hops:
            entry = {**hop.to_json(), "reply": hop.text}
            if not _plain_text(hop.parts):
                entry["parts"] = [MessageToDict(part) for part in hop.parts]
            hops.append(entry)
        data["hops"] = hops
        if self.failure is not None:
            data["failure"] = {"agent": self.failure[0], "message": self.failure[1]}
        return data


def turn_from_task(task: Task, team: str) -> RecordedTurn:
    """The last turn `task` recorded: its last user message, its trail and each hop's reply."""
    routing = MessageToDict(task.metadata).get(client_routing.URI)
    trail = routing.get("trail") if isinstance(routing, dict) else None
    if not isinstance(trail, list):
        raise ReplayInputError(f"task '{task.id}' is not a team turn: its metadata holds no route")
    asked = [message for message in task.history if message.role == ROLE_USER]
    if not asked:
        raise ReplayInputError(f"task '{task.id}' holds no user message to replay")
    replies = _hop_replies(task)
    hops = [_hop(record, replies.get((number, str(record.get("agent"))), [])) for number, record in
            enumerate((r for r in trail if isinstance(r, dict)), 1)]  # fmt: skip
    error = routing.get("error") if isinstance(routing, dict) else None
    failure = None
    if isinstance(error, dict) and error.get("agent"):
        agent = str(error["agent"])
        failure = (agent, str(error.get("message", "")).removeprefix(f"agent '{agent}': "))
    return RecordedTurn(team, task.id, _turn_message(asked[-1]), hops, _state(task.status.state), failure)


def turn_from_execution(view: Task, team: str) -> RecordedTurn:
    """The last turn of a team's execution in a room, from its task as `GET /executions/{id}/task`
    serves it (the room's messages as its history): the turn that the last message a person posted
    there started. Its members' messages are in that history too, so the last user-role one will not do."""
    people = [message for message in view.history if _sender_kind(message) == "user"]
    task = Task()
    task.CopyFrom(view)
    del task.history[:]
    task.history.extend(people[-1:])
    return turn_from_task(task, team)


def _sender_kind(message: Message) -> str | None:
    said = MessageToDict(message.metadata).get(keys.MESSAGE)
    sender = said.get("sender") if isinstance(said, dict) else None
    return str(sender.get("kind")) if isinstance(sender, dict) else None


def turn_from_json(data: dict[str, Any], team: str) -> RecordedTurn:
    """A turn a suite holds (`RecordedTurn.to_json`); the suite's schema checked its fields."""
    message = Message(role=ROLE_USER, message_id="recorded", parts=_parts(data, "input"))
    hops = [
        RecordedHop(
            agent=hop["agent"],
            sender=hop["sender"],
            recipient=hop["recipient"],
            reason=hop.get("reason", ""),
            ms=float(hop.get("ms", 0.0)),
            tokens=hop.get("tokens"),
            parts=_parts(hop, "reply"),
            trail=hop.get("trail"),
            loop=bool(hop.get("loop", False)),
        )
        for hop in data["hops"]
    ]
    failure = data.get("failure")
    return RecordedTurn(
        team=team,
        task_id=str(data.get("task", "")),
        message=message,
        hops=hops,
        state=str(data.get("state", "completed")),
        failure=(failure["agent"], failure.get("message", "")) if failure else None,
    )


def _hop(record: dict[str, Any], parts: list[Part]) -> RecordedHop:
    tokens = record.get("tokens")
    inner = record.get("trail")
    return RecordedHop(
        agent=str(record.get("agent", "")),
        sender=str(record.get("sender", "")),
        recipient=str(record.get("recipient", "")),
        reason=str(record.get("reason", "")),
        ms=float(record.get("ms", 0.0)),
        tokens=int(tokens) if isinstance(tokens, int | float) else None,
        parts=parts,
        trail=_whole_numbers(inner) if isinstance(inner, list) else None,
        loop=bool(record.get("loop", False)),
    )


def _hop_replies(task: Task) -> dict[tuple[int, str], list[Part]]:
    """(hop number, agent) -> the reply parts of that hop's artifact."""
    replies: dict[tuple[int, str], list[Part]] = {}
    for artifact in task.artifacts:
        record = MessageToDict(artifact.metadata).get(keys.HOP)
        if isinstance(record, dict) and isinstance(record.get("hop"), int | float):
            replies[(int(record["hop"]), str(record.get("agent", artifact.name)))] = list(artifact.parts)
    return replies


def _turn_message(asked: Message) -> Message:
    """The caller's message as a new turn receives it: its content, no ids of the old task."""
    message = Message(role=ROLE_USER, message_id="recorded", parts=list(asked.parts))
    for key, value in asked.metadata.items():
        if key != client_routing.URI:  # a routing caller's data named the old peers
            message.metadata[key] = value
    return message


def _state(state: TaskState) -> str:
    return state_name(state)


def _plain_text(parts: list[Part] | Any) -> bool:
    return len(parts) <= 1 and all(part.WhichOneof("content") == "text" for part in parts)


def _parts(data: dict[str, Any], text_key: str) -> list[Part]:
    if data.get("parts"):
        return [ParseDict(part, Part()) for part in data["parts"]]
    return [Part(text=str(data.get(text_key, "")))]


def _whole_numbers(value: Any) -> Any:
    """JSON read back from protobuf has every number as a float: hop numbers and tokens are ints."""
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
