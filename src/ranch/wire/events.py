"""Folding A2A stream events into a Task: the one rule both the Router and the task core use."""

from __future__ import annotations

from a2a.types import Role, Task, TaskArtifactUpdateEvent, TaskState
from google.protobuf.struct_pb2 import Struct

# Enum values read once: each `TaskState.TASK_STATE_X` goes through protobuf's Python
# `__getattr__` (about 1.4 us a read), and hot paths read them on every hop.
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
