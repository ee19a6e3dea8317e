"""One agent call for one task, and everyone watching it: subscribers, webhooks, a sink.

A `Run` lives while the engine drives its agent. Subscribers (SendStreamingMessage,
SubscribeToTask) read its events from bounded memory streams; a `RunSink` (a room's) is
told of every event as it is folded, and of the settled task once it is stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import anyio
from a2a.types import Message, Task, TaskState
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ranch.agents.base import Event
from ranch.exceptions import StoreUnavailable
from ranch.tasks.lifetimes import Lifetime
from ranch.utils.lru import Lru

SUBSCRIBER_BUFFER = 1024
"""Events buffered per subscriber; one that falls this far behind is dropped (it can GetTask)."""
RECENT_TASKS = 1024
RECENT_BYTES = 32 * 1024 * 1024
"""Encoded bytes of the tasks kept in `RecentTasks`; the least recently stored go first."""


class RunSink(Protocol):
    """Someone who must hear of a run's events in order, and of its end, before its caller does."""

    async def event(self, run: Run, event: Event) -> None:
        """One event, folded into `run.task` (or the direct reply), before subscribers get it."""

    async def settled(self, run: Run) -> None:
        """The run ended and its task (final, or waiting for input) is stored."""


@dataclass(eq=False)
class Run:
    """One agent call for one task, and everyone watching it."""

    task_id: str
    context_id: str
    owner: str
    task: Task | None
    """None until the agent's first task event (a direct Message reply never makes one)."""
    lifetime: Lifetime | None = None
    """A long-lived run's (a room execution's turn): what shapes its events (`tasks.lifetimes`)."""
    sink: RunSink | None = None
    reply: Message | None = None
    done: anyio.Event = field(default_factory=anyio.Event)
    subscribers: list[MemoryObjectSendStream[Event]] = field(default_factory=list)
    sending: dict[MemoryObjectReceiveStream[Event], MemoryObjectSendStream[Event]] = field(
        default_factory=dict
    )
    """Each subscriber's sending end, by the end it reads (`leave`)."""
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    ending: TaskState | None = None
    """How a stop from outside ends the task: CANCELED (CancelTask) or COMPLETED (an admin)."""
    ending_reason: str = ""
    """Why, as its final status message says."""
    held: Event | None = None
    """The event that ended the run, published once the final state is stored."""
    shown: Task | None = None
    """What readers see while the final state is being stored: the task just before it."""
    error: StoreUnavailable | None = None
    """Set when the task could not be stored: callers get this instead of an unstored state."""
    logged: list[Event] = field(default_factory=list)
    """Events waiting to go to the task's log for other replicas, oldest first."""

    @property
    def long_lived(self) -> bool:
        """A task that outlives this answer: a normal answer leaves it waiting for the next message."""
        return self.lifetime is not None

    def stop(self, ending: TaskState, reason: str) -> None:
        """End the run from outside: its agent is cancelled and its task ends `ending`, saying `reason`."""
        self.ending, self.ending_reason = ending, reason
        self.scope.cancel()

    @property
    def visible(self) -> Task | None:
        """The task as GetTask and ListTasks may show it: never a final state not yet stored."""
        return self.shown if self.shown is not None else self.task

    def subscribe(self) -> MemoryObjectReceiveStream[Event]:
        send, receive = anyio.create_memory_object_stream[Event](SUBSCRIBER_BUFFER)
        if self.done.is_set():
            send.close()
        else:
            self.subscribers.append(send)
            self.sending[receive] = send
        return receive

    def leave(self, receive: MemoryObjectReceiveStream[Event]) -> None:
        """A subscriber stops reading (its client left, its stream was ended): it is no longer
        published to, and its sending end is closed now rather than when the run ends."""
        send = self.sending.pop(receive, None)
        if send is not None:
            if send in self.subscribers:
                self.subscribers.remove(send)
            send.close()

    def publish(self, event: Event) -> None:
        for stream in list(self.subscribers):
            try:
                stream.send_nowait(event)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.subscribers.remove(stream)
                stream.close()

    def close(self) -> None:
        for stream in self.subscribers:
            stream.close()
        self.subscribers.clear()
        self.sending.clear()
        self.done.set()


class RecentTasks:
    """Tasks stored lately, with their owners, bounded in number and in encoded bytes (least recently
    stored first; a task larger than the whole cache is read from the database when asked)."""

    def __init__(self, max_count: int = RECENT_TASKS, max_bytes: int = RECENT_BYTES) -> None:
        self._tasks: Lru[str, tuple[str, Task]] = Lru(max_count, max_bytes)

    @property
    def size(self) -> int:
        """Encoded bytes of the tasks held."""
        return self._tasks.size

    def get(self, task_id: str) -> tuple[str, Task] | None:
        return self._tasks.peek(task_id)

    def put(self, owner: str, task: Task) -> None:
        self._tasks.put(task.id, (owner, task), task.ByteSize())

    def pop(self, task_id: str) -> None:
        self._tasks.pop(task_id)

    def __len__(self) -> int:
        return len(self._tasks)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._tasks

    def clear(self) -> None:
        self._tasks.clear()
