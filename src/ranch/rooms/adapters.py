"""Room messages <-> A2A messages, and executions -> A2A tasks (docs/api.md).

A room is an A2A context (contextId = room id) and an execution is a task
(id = execution id). `ready` has no A2A equivalent: the execution is idle and
waits for the next message, so it is served as INPUT_REQUIRED with the real
status in `metadata["ranch.execution"]`.
"""

from __future__ import annotations

from collections.abc import Sequence

from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from ranch.db.models import Execution, RoomMessage

EXECUTION_KEY = "ranch.execution"
MESSAGE_KEY = "ranch.message"
"""Metadata key on A2A messages naming the room message they were made from."""

STATES: dict[str, TaskState] = {
    "submitted": TaskState.TASK_STATE_SUBMITTED,
    "working": TaskState.TASK_STATE_WORKING,
    "ready": TaskState.TASK_STATE_INPUT_REQUIRED,
    "input-required": TaskState.TASK_STATE_INPUT_REQUIRED,
    "completed": TaskState.TASK_STATE_COMPLETED,
    "failed": TaskState.TASK_STATE_FAILED,
    "canceled": TaskState.TASK_STATE_CANCELED,
}
FINAL = frozenset({"completed", "failed", "canceled"})
"""Execution statuses that end it; the agent's next message in the room starts a new one."""
BUSY = frozenset({"submitted", "working"})


def to_a2a_message(row: RoomMessage, agent_id: str, context: Part | None = None) -> Message:
    """A room message as the A2A message `agent_id` sees: its own words are role agent."""
    own = row.sender_id == agent_id and row.sender_kind in ("agent", "team")
    message = Message(
        message_id=row.id,
        role=Role.ROLE_AGENT if own else Role.ROLE_USER,
        context_id=row.room_id,
        parts=([context] if context else []) + [Part(text=row.text)],
    )
    message.metadata.update(
        {
            MESSAGE_KEY: {
                "id": row.id,
                "cursor": row.seq,
                "type": row.type,
                "sender": {"kind": row.sender_kind, "id": row.sender_id},
            }
        }
    )
    return message


def to_task(execution: Execution, history: Sequence[RoomMessage], limit: int | None) -> Task:
    """The execution as an A2A Task; `history` oldest first, trimmed to the last `limit`."""
    kept = list(history)
    if limit is not None:
        kept = kept[-limit:] if limit > 0 else []
    timestamp = Timestamp()
    timestamp.FromNanoseconds(int(execution.updated_at * 1e9))
    status = TaskStatus(state=STATES[execution.status], timestamp=timestamp)
    if execution.reason:
        status.message.CopyFrom(
            Message(
                message_id=f"{execution.id}-status",
                role=Role.ROLE_AGENT,
                context_id=execution.room_id,
                task_id=execution.id,
                parts=[Part(text=execution.reason)],
            )
        )
    task = Task(
        id=execution.id,
        context_id=execution.room_id,
        status=status,
        history=[to_a2a_message(row, execution.agent_id) for row in kept],
    )
    for message in task.history:
        message.task_id = execution.id
    replies = [row for row in history if row.execution_id == execution.id and row.type == "text"]
    if replies:
        task.artifacts.append(
            Artifact(artifact_id=f"{execution.id}-reply", name="reply", parts=[Part(text=replies[-1].text)])
        )
    meta = Struct()
    meta.update(
        {EXECUTION_KEY: {"status": execution.status, "agent": execution.agent_id, "turns": execution.turns}}
    )
    if execution.reason:
        meta[EXECUTION_KEY]["reason"] = execution.reason
    task.metadata.CopyFrom(meta)
    return task
