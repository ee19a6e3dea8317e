"""The one fold of an agent's A2A events into its answer: a direct Message, or a Task.

Every consumer of agent events folds them with `TaskFold`: the task engine (which keeps
the whole Task: status history, artifacts, metadata), the Router (which needs a hop's
reply parts, state and routing decision: `HopOutcome`), `call_remote_agent` and `/mcp`.
The rules, as the A2A spec gives them:

- a `Message` is the whole answer;
- a `Task` replaces the status (the previous status message moves into history), replaces
  the artifacts when it carries any, and merges its metadata;
- a status update replaces the status the same way and merges its metadata;
- an artifact update adds its artifact, or appends to / replaces the one with its id.

The answer is final once it is a Message, or once the task is terminal or waits for input.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from a2a.types import (
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict

from ranch.agents.base import Agent, Call, Event, text_of
from ranch.agents.invoke import invoke
from ranch.exceptions import AgentError, InvalidAgentReply
from ranch.wire import client_routing, keys
from ranch.wire.events import COMPLETED, INTERRUPTED, TERMINAL, UNSUCCESSFUL, apply_artifact, merge_metadata


def state_name(state: TaskState) -> str:
    """`TASK_STATE_INPUT_REQUIRED` -> `input-required`: how errors and summaries name a state."""
    return str(TaskState.Name(state)).removeprefix("TASK_STATE_").lower().replace("_", "-")


@dataclass
class HopOutcome:
    """A member's answer: its reply parts, final state and decision (its ids are the agent's business)."""

    agent: str
    parts: list[Part]
    state: TaskState
    decision: client_routing.RoutingDecision | None
    trail: list[dict[str, Any]] | None = None
    """The hops made inside the member, when it is a team (its answer's trail)."""
    tokens: int | None = None
    """What the answer reports it cost, in tokens (the extension's `usage`), when it does."""
    approval: dict[str, Any] | None = None
    """A member team waiting for its caller's approval: what it asks (`ranch.approval`)."""
    problem: str | None = None
    """What was wrong with the answer's routing data, if anything (the Router names it)."""

    @property
    def interrupted(self) -> bool:
        return self.state in INTERRUPTED

    @property
    def text(self) -> str:
        return text_of(Message(parts=self.parts))


class TaskFold:
    """Folds one agent's events into its answer (see the module docstring for the rules)."""

    def __init__(self, agent: str, task: Task | None = None) -> None:
        self.agent = agent
        self.message: Message | None = None
        """The direct reply, when the agent answered with a Message."""
        self.task = task
        """The task the events fold into: given (the engine's), or made from the first task event."""

    def fold(self, event: Event) -> bool:
        """Apply one event; True once the answer is final."""
        if isinstance(event, Message):
            self.message = event
            return True
        task = self._task(event)
        if isinstance(event, Task):
            if event.HasField("status"):
                archive_status(task)
                task.status.CopyFrom(event.status)
            if event.artifacts:
                del task.artifacts[:]
                task.artifacts.extend(event.artifacts)
            merge_metadata(task, event.metadata)
        elif isinstance(event, TaskStatusUpdateEvent):
            archive_status(task)
            task.status.CopyFrom(event.status)
            merge_metadata(task, event.metadata)
        elif isinstance(event, TaskArtifactUpdateEvent):
            apply_artifact(task, event)
        else:
            raise InvalidAgentReply(self.agent, f"yielded {type(event).__name__}, not an A2A event")
        return self.final

    @property
    def final(self) -> bool:
        """The answer is complete: a Message, or a task that ended or waits for input."""
        if self.message is not None:
            return True
        state = self.task.status.state if self.task is not None else None
        return state in TERMINAL or state in INTERRUPTED

    def _task(self, event: Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> Task:
        if self.task is None:
            task_id = event.id if isinstance(event, Task) else event.task_id
            self.task = Task(id=task_id, context_id=event.context_id, status=TaskStatus())
        return self.task

    def outcome(self) -> HopOutcome:
        """What the answer comes to; AgentError when it failed, InvalidAgentReply when it never ended."""
        if self.message is not None:
            decision, problem = client_routing.read_checked(self.message)
            return HopOutcome(
                agent=self.agent,
                parts=list(self.message.parts),
                state=COMPLETED,
                decision=decision,
                tokens=client_routing.read_usage(self.message),
                problem=problem,
            )
        task = self.task
        if task is None:
            raise InvalidAgentReply(self.agent, "answered with no message and no task")
        state = task.status.state
        if state in UNSUCCESSFUL:
            detail = text_of(task.status.message) if task.status.HasField("message") else ""
            raise AgentError(
                self.agent, f"its task ended {state_name(state)}" + (f": {detail}" if detail else "")
            )
        if state not in INTERRUPTED and state != COMPLETED:
            raise InvalidAgentReply(self.agent, "its answer ended before the task finished")
        decision, problem = client_routing.read_checked(task)
        return HopOutcome(
            agent=self.agent,
            parts=reply_parts(task),
            state=state,
            decision=decision,
            problem=problem,
            trail=client_routing.read_trail(task),
            tokens=client_routing.read_usage(task),
            approval=_approval(task) if state in INTERRUPTED else None,
        )


def archive_status(task: Task) -> None:
    """Move the current status message into history before the status changes."""
    if task.status.HasField("message") and task.status.message.parts:
        task.history.append(task.status.message)


def reply_parts(task: Task) -> list[Part]:
    """The final status message's parts, else every artifact's parts."""
    if task.status.HasField("message") and task.status.message.parts:
        return list(task.status.message.parts)
    return [part for artifact in task.artifacts for part in artifact.parts]


async def fold(events: AsyncIterator[Event], agent_id: str) -> TaskFold:
    """Fold `events` until the answer is final (the rest of the stream is not read)."""
    folded = TaskFold(agent_id)
    async for event in events:
        if folded.fold(event):
            break
    return folded


async def collect(agent: Agent, message: Message, call: Call, *, seconds: float | None = None) -> HopOutcome:
    """Call `agent` once (`invoke`: its timeout, its errors) and fold its answer into a `HopOutcome`."""
    async with invoke(agent, message, call, seconds=seconds) as events:
        folded = await fold(events, agent.id)
    return folded.outcome()


def _approval(task: Task) -> dict[str, Any] | None:
    if not task.status.HasField("message") or keys.APPROVAL not in task.status.message.metadata.fields:
        return None
    asked = MessageToDict(task.status.message.metadata).get(keys.APPROVAL)
    return asked if isinstance(asked, dict) else None
