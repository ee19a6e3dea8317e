"""Fold one member's A2A events into what the Router needs from that hop."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

from a2a.types import (
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from ranch.agents.base import Event, text_of
from ranch.exceptions import AgentError, InvalidAgentReply
from ranch.wire import client_routing
from ranch.wire.events import COMPLETED, INTERRUPTED, UNSUCCESSFUL, apply_artifact, merge_metadata


@dataclass
class HopOutcome:
    """A member's answer: its reply parts, final state and decision (its ids are the agent's business)."""

    agent: str
    parts: list[Part]
    state: TaskState
    decision: client_routing.RoutingDecision | None

    @property
    def interrupted(self) -> bool:
        return self.state in INTERRUPTED

    @property
    def text(self) -> str:
        return text_of(Message(parts=self.parts))


async def collect(agent: str, events: AsyncGenerator[Event, None]) -> HopOutcome:
    """Consume a member's events; raise AgentError if they do not add up to an answer."""
    folder = Folder(agent)
    async with aclosing(events) as stream:  # closing the member's generator releases what it holds
        async for event in stream:
            if folder.fold(event):
                break
    return folder.outcome()


class Folder:
    """Folds one agent's events into its answer (also used by rooms, which watch the events go by)."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.message: Message | None = None
        self.task: Task | None = None

    def fold(self, event: Event) -> bool:
        """Apply one event; True once the answer is final (a Message, or a terminal/interrupted task)."""
        if isinstance(event, Message):
            self.message = event
            return True
        task = self._task(event)
        if isinstance(event, Task):
            task.CopyFrom(event)
        elif isinstance(event, TaskStatusUpdateEvent):
            task.status.CopyFrom(event.status)
            merge_metadata(task, event.metadata)
        elif isinstance(event, TaskArtifactUpdateEvent):
            apply_artifact(task, event)
        else:
            raise InvalidAgentReply(self.agent, f"yielded {type(event).__name__}, not an A2A event")
        return (
            task.status.state in INTERRUPTED
            or task.status.state in UNSUCCESSFUL
            or (task.status.state == COMPLETED)
        )

    def _task(self, event: Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> Task:
        if self.task is None:
            task_id = event.id if isinstance(event, Task) else event.task_id
            self.task = Task(id=task_id, context_id=event.context_id, status=TaskStatus())
        return self.task

    def outcome(self) -> HopOutcome:
        if self.message is not None:
            message = self.message
            return HopOutcome(
                agent=self.agent,
                parts=list(message.parts),
                state=COMPLETED,
                decision=client_routing.read_decision(message),
            )
        task = self.task
        if task is None:
            raise InvalidAgentReply(self.agent, "answered with no message and no task")
        state = task.status.state
        if state in UNSUCCESSFUL:
            detail = text_of(task.status.message) if task.status.HasField("message") else ""
            name = TaskState.Name(state).removeprefix("TASK_STATE_").lower()
            raise AgentError(self.agent, f"its task ended {name}" + (f": {detail}" if detail else ""))
        if state not in INTERRUPTED and state != COMPLETED:
            raise InvalidAgentReply(self.agent, "its answer ended before the task finished")
        return HopOutcome(
            agent=self.agent,
            parts=_reply_parts(task),
            state=state,
            decision=client_routing.read_decision(task),
        )


def _reply_parts(task: Task) -> list[Part]:
    """The final status message's parts, else every artifact's parts."""
    if task.status.HasField("message") and task.status.message.parts:
        return list(task.status.message.parts)
    return [part for artifact in task.artifacts for part in artifact.parts]
