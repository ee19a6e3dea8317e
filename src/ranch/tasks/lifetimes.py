"""Long-lived runs: a task that outlives one answer, one turn per message (a room execution's).

The engine does not know what such a task's statuses are called: whoever starts the run gives it a
`Lifetime`, which shapes each status event of the turn (rooms: a normal answer leaves the execution
waiting for the next message, not completed) and marks the task as a turn starts. A task's mark
is a status word kept in `metadata["ranch.execution"]`; the engine writes the words it is given,
and a state's own name (`completed`, `failed`) when it ends a marked task itself.

Each turn starts with no artifacts; the task keeps no history (its owner builds it from elsewhere);
a direct `Message` reply becomes the turn's `reply` artifact and its completing status message.
"""

from __future__ import annotations

from typing import Protocol

from a2a.types import Artifact, Message, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from google.protobuf.struct_pb2 import Struct, Value

from ranch.wire import keys


class Lifetime(Protocol):
    """What shapes the events of a long-lived run's task; given to `TaskEngine.start`."""

    def begin(self, task: Task) -> None:
        """The task as a turn starts working: mark it."""

    def shape(self, event: Task | TaskStatusUpdateEvent) -> None:
        """One status event of a turn (or the task itself), changed in place."""


def mark(metadata: Struct, status: str) -> None:
    """`metadata["ranch.execution"].status = status`, keeping its other fields."""
    entry = metadata.fields[keys.EXECUTION]
    if entry.WhichOneof("kind") != "struct_value":
        entry.CopyFrom(Value(struct_value=Struct()))
    entry.struct_value.fields["status"].string_value = str(status)


def marked(task: Task) -> bool:
    """Whether the task is a long-lived one's (its statuses are marked)."""
    return keys.EXECUTION in task.metadata.fields


def done(event: TaskStatusUpdateEvent | Task) -> bool:
    """The agent marked its reply `ranch.done`, ending the long-lived task: on the status message, or
    on the event itself."""
    for metadata in (event.status.message.metadata, event.metadata):
        value = metadata.fields.get(keys.DONE)
        if value is not None and value.WhichOneof("kind") == "bool_value" and value.bool_value:
            return True
    return False


def new_turn(task: Task) -> None:
    """A turn starts with no artifacts, and the task keeps no history."""
    del task.artifacts[:]
    del task.history[:]


def reply_artifact(task_id: str, context_id: str, message: Message) -> TaskArtifactUpdateEvent:
    """A direct reply, kept as the turn's `reply` artifact."""
    artifact = Artifact(artifact_id=f"{task_id}-reply", name="reply", parts=message.parts)
    return TaskArtifactUpdateEvent(task_id=task_id, context_id=context_id, artifact=artifact, last_chunk=True)
