"""Folding A2A stream events into a Task: the one rule both the Router and the task core use."""

from __future__ import annotations

from a2a.types import Task, TaskArtifactUpdateEvent, TaskState
from google.protobuf.struct_pb2 import Struct

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
