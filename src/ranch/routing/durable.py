"""Durable turns: where a team turn in flight is, written as each hop starts, so the replica that takes
over a stopped replica's task resumes the turn there (docs/routing.md, "Durable turns").

A checkpoint holds the turn's trail so far, the hop it is making (target, sender, reason, parts), the
replies of the hops before it (the task's artifacts, for a store that holds only the task as the turn
began), what the Router carries from hop to hop (the previous agent's handoffs, a pipeline, the
decision it passes outward) and, once a member that can be re-attached to names its own A2A task,
that task's id. It is committed in the same transaction as the conversation so far, and deleted with
the task's end.

A hop starts only once its checkpoint is committed, except a hop to a member that answers at once and
runs again safely (`rules`, `echo`): it writes none, so a turn of such hops costs nothing more, and a
stop during one resumes the turn from the checkpoint before it (or fails it, when there is none), the
hops since then made again. The member's own task id goes with the group's next write (or its linger).

A resumed turn does not send the hop in flight again when its member named a task: it re-attaches to
that task (`Agent.reattach`). Otherwise the member's `resume` says: run the hop again, skip it (the
default agent goes on, told it was lost), or fail the turn. The loop guard starts afresh; the hop and
token budgets hold, since they are read from the trail.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from a2a.types import Artifact, Message, Part, Task
from google.protobuf.json_format import MessageToDict, ParseDict

from ranch.agents.base import Agent, AgentInfo, Call, Event
from ranch.identity.caller import Caller
from ranch.routing.steps import Way
from ranch.routing.trail import Hop, Trail


class CheckpointStore(Protocol):
    """Where checkpoints are kept: the hub's database (`db.conversations.ConversationStore`)."""

    async def save_checkpoint(
        self, task_id: str, owner: str, team_id: str, state: dict[str, Any], *, wait: bool = True
    ) -> None: ...

    def drop_checkpoint(self, task_id: str) -> None: ...

    async def checkpoint(self, task_id: str) -> tuple[str, str, dict[str, Any]] | None: ...


@dataclass
class Checkpoint:
    """One turn of team `team_id` on task `task_id`, as it was when its latest hop started."""

    task_id: str
    owner: str
    team_id: str
    message: Message
    """The caller's message the turn answers (its contextId, its routing data)."""
    caller: Caller | None
    trail: Trail
    way: Way
    """The hop in flight."""
    handoffs: list[str] | None = None
    pipeline: bool = False
    outward: dict[str, Any] | None = None
    member_task: str = ""
    """The task the hop's member runs it as, once the member named it ("" until then)."""
    version: int = 0
    """The conversation's version written with it."""
    replies: list[Artifact] = field(default_factory=list)
    """The hops' replies before the one in flight (the task's artifacts, for a store that has only
    the task as it was when the turn began: `restore`)."""

    def restore(self, task: Task) -> None:
        """Give `task` the replies it does not hold yet (a single process stores the task when the
        turn begins and ends; with replicas, its event log has them)."""
        held = {artifact.artifact_id for artifact in task.artifacts}
        task.artifacts.extend(reply for reply in self.replies if reply.artifact_id not in held)

    def state(self) -> dict[str, Any]:
        """What the database keeps (JSON)."""
        return {
            "message": MessageToDict(self.message),
            "caller": asdict(self.caller) if self.caller is not None else None,
            "trail": self.trail.to_json(),
            "way": {
                "target": self.way.target,
                "reason": self.way.reason,
                "sender": self.way.sender,
                "parts": [MessageToDict(part) for part in self.way.parts],
            },
            "handoffs": self.handoffs,
            "pipeline": self.pipeline,
            "outward": self.outward,
            "memberTask": self.member_task,
            "version": self.version,
            "replies": [MessageToDict(reply) for reply in self.replies],
        }

    @classmethod
    def of(cls, task_id: str, owner: str, team_id: str, state: dict[str, Any]) -> Checkpoint:
        """The checkpoint a stored row holds."""
        way = state["way"]
        caller = state.get("caller")
        handoffs = state.get("handoffs")
        return cls(
            task_id=task_id,
            owner=owner,
            team_id=team_id,
            message=ParseDict(state["message"], Message()),
            caller=Caller(**caller) if isinstance(caller, dict) else None,
            trail=Trail(Hop(**hop) for hop in state.get("trail", [])),
            way=Way(
                str(way["target"]),
                str(way.get("reason", "")),
                str(way["sender"]),
                [ParseDict(part, Part()) for part in way.get("parts", [])],
            ),
            handoffs=[str(h) for h in handoffs] if isinstance(handoffs, list) else None,
            pipeline=bool(state.get("pipeline", False)),
            outward=state.get("outward"),
            member_task=str(state.get("memberTask", "")),
            version=int(state.get("version", 0)),
            replies=[ParseDict(reply, Artifact()) for reply in state.get("replies", [])],
        )


class Reattached(Agent):
    """A member's hop in flight when its turn was resumed: its events come from the task the member
    named (`Agent.reattach`), under the member's own timeout; the message is not sent again."""

    streams_text = True

    def __init__(self, member: Agent, task_id: str) -> None:
        self.id = member.id
        self.timeout = member.timeout
        self.member = member
        self.task_id = task_id

    async def info(self) -> AgentInfo:
        return await self.member.info()

    def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        return self.member.reattach(self.task_id, message.context_id, call)
