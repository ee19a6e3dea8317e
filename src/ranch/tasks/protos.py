"""Small helpers on the A2A protos a task is made of: copies, timestamps, and the states that end."""

from __future__ import annotations

import time
from typing import TypeVar

from a2a.types import Message, Part, StreamResponse, Task, TaskState, TaskStatus, TaskStatusUpdateEvent
from google.protobuf.timestamp_pb2 import Timestamp

from ranch.agents.base import Event
from ranch.ids import new_id
from ranch.wire.events import INTERRUPTED, ROLE_AGENT, TERMINAL

Proto = TypeVar("Proto", Task, Message)


def copy(value: Proto) -> Proto:
    copied = type(value)()
    copied.CopyFrom(value)
    return copied


def stamp(status: TaskStatus) -> None:
    """Give `status` the time now, unless it has one."""
    if not status.HasField("timestamp"):
        now = Timestamp()
        now.FromNanoseconds(time.time_ns())
        status.timestamp.CopyFrom(now)


def at_rest(task: Task) -> bool:
    """No process works on it: it ended, or it waits for input."""
    return task.status.state in TERMINAL or task.status.state in INTERRUPTED


def ends(event: Event) -> bool:
    """True when `event` may move its task to a final (terminal or interrupted) state."""
    if isinstance(event, TaskStatusUpdateEvent) or (isinstance(event, Task) and event.HasField("status")):
        return event.status.state in TERMINAL or event.status.state in INTERRUPTED
    return False


def agent_text(task_id: str, context_id: str, text: str) -> Message:
    """A message of the agent's, in the task, saying `text` (why a task ended, for one)."""
    return Message(
        message_id=new_id(), role=ROLE_AGENT, context_id=context_id, task_id=task_id, parts=[Part(text=text)]
    )


def status_event(task_id: str, context_id: str, state: TaskState, message: Message) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(
        task_id=task_id, context_id=context_id, status=TaskStatus(state=state, message=message)
    )


def event_of(data: bytes) -> Event:
    """An event as a task's log holds it (a StreamResponse's encoding)."""
    response = StreamResponse.FromString(data)
    kind = response.WhichOneof("payload")
    event: Event = getattr(response, kind or "task")
    return event
