"""Folding A2A stream events into a Task: the one rule both the Router and the task core use."""

from __future__ import annotations

from a2a.types import Message, Role, Task, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent
from google.protobuf.struct_pb2 import Struct

# Enum values read once: each `TaskState.TASK_STATE_X` goes through protobuf's Python
# `__getattr__` (slow for a constant), and hot paths read them on every hop.
ROLE_USER = Role.ROLE_USER
ROLE_AGENT = Role.ROLE_AGENT
SUBMITTED = TaskState.TASK_STATE_SUBMITTED
WORKING = TaskState.TASK_STATE_WORKING
COMPLETED = TaskState.TASK_STATE_COMPLETED
FAILED = TaskState.TASK_STATE_FAILED
CANCELED = TaskState.TASK_STATE_CANCELED
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED

TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)
"""States a task never leaves."""
INTERRUPTED = frozenset({TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED})
"""States in which a task waits for the caller; the next message continues it."""
UNSUCCESSFUL = TERMINAL - {TaskState.TASK_STATE_COMPLETED}


def apply_artifact(task: Task, event: TaskArtifactUpdateEvent) -> None:
    """Add the event's artifact to `task`, or extend / replace the one with the same id."""
    for artifact in task.artifacts:
        if artifact.artifact_id == event.artifact.artifact_id:
            if event.append:
                artifact.parts.extend(event.artifact.parts)
            else:
                artifact.CopyFrom(event.artifact)
            return
    task.artifacts.append(event.artifact)


def merge_metadata(task: Task, metadata: Struct) -> None:
    """Top-level keys of an event's metadata replace the task's, as `dict.update` would."""
    for key, value in metadata.fields.items():
        task.metadata.fields[key].CopyFrom(value)


class ReplyMeter:
    """The size of the reply a stream of events folds into, kept as they arrive (no re-folding).

    Counted: the last status message and every artifact (appended chunks add up); the task's
    history is not the reply (a peer may echo the request there) and is not counted.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._status = 0
        self._artifacts: dict[str, int] = {}
        self._artifact_total = 0

    def add(self, event: Message | Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> bool:
        """Count one event; False once the reply is over the limit."""
        if isinstance(event, Message):
            return bool(event.ByteSize() <= self.limit)
        if isinstance(event, Task):
            self._artifacts = {a.artifact_id: a.ByteSize() for a in event.artifacts}
            self._artifact_total = sum(self._artifacts.values())
        if isinstance(event, Task | TaskStatusUpdateEvent):
            self._status = event.status.message.ByteSize() if event.status.HasField("message") else 0
        if isinstance(event, TaskArtifactUpdateEvent):
            artifact_id, size = event.artifact.artifact_id, event.artifact.ByteSize()
            before = self._artifacts.get(artifact_id, 0)
            after = before + size if event.append else size
            self._artifacts[artifact_id] = after
            self._artifact_total += after - before
        return self._status + self._artifact_total <= self.limit
