"""Room messages as A2A messages, and executions as A2A tasks (docs/api.md).

A room is an A2A context (contextId = room id) and an execution is a task (id = execution
id) of the task engine, owned by its room. Its history is the room's: the messages the agent
received or wrote, trimmed by historyLength or the agent's own history_length; its status
and artifacts are the engine's; `metadata["ranch.execution"]` adds what executions say of
themselves ({status, agent, turns, reason, parent, children}): `ready` has no A2A state of its own,
it is INPUT_REQUIRED with this status; nor has `handoff`, which is WORKING with it (the parent waits
for the `children` it handed work to).
"""

from __future__ import annotations

from collections.abc import Sequence

from a2a.types import Artifact, Message, Part, Role, Task
from google.protobuf.struct_pb2 import Struct

from ranch.db.models import Execution, RoomMessage
from ranch.rooms import parts as room_parts
from ranch.wire import keys


def to_a2a_message(row: RoomMessage, agent_id: str, context: Part | None = None) -> Message:
    """A room message as the A2A message `agent_id` sees: its own words are role agent."""
    own = row.sender_id == agent_id and row.sender_kind in ("agent", "team")
    message = Message(
        message_id=row.id,
        role=Role.ROLE_AGENT if own else Role.ROLE_USER,
        context_id=row.room_id,
        parts=([context] if context else []) + room_parts.as_parts(row),
    )
    message.metadata.update(
        {
            keys.MESSAGE: {
                "id": row.id,
                "cursor": row.seq,
                "type": row.type,
                "sender": {"kind": row.sender_kind, "id": row.sender_id},
            }
        }
    )
    return message


def execution_view(
    task: Task,
    row: Execution,
    history: Sequence[RoomMessage],
    limit: int | None,
    waits_on: Sequence[str] = (),
) -> Task:
    """The execution's task as clients read it: the engine's task, the room's history (oldest first,
    trimmed to the last `limit`), and the execution's own account in metadata, handoffs included: a
    child's handing message names its parent task in `referenceTaskIds`, and `waits_on` are the
    open children a parent handed work to."""
    view = Task()
    view.CopyFrom(task)
    kept = list(history)
    if limit is not None:
        kept = kept[-limit:] if limit > 0 else []
    del view.history[:]
    for room_message in kept:
        message = to_a2a_message(room_message, row.agent_id)
        message.task_id = row.id
        if row.parent_execution_id is not None and _hands_over(room_message, row.id):
            message.reference_task_ids.append(row.parent_execution_id)
        view.history.append(message)
    if not view.artifacts:  # a turn no run drove (an external agent's reply): its last reply
        replies = [m for m in history if m.execution_id == row.id and m.type == "text"]
        if replies:
            view.artifacts.append(
                Artifact(artifact_id=f"{row.id}-reply", name="reply", parts=room_parts.as_parts(replies[-1]))
            )
    account = Struct()
    account.update({"status": row.status, "agent": row.agent_id, "turns": row.turns})
    if row.reason:
        account.update({"reason": row.reason})
    if row.parent_execution_id is not None:
        account.update({"parent": row.parent_execution_id})
    if waits_on:
        account.update({"children": list(waits_on)})
    view.metadata.fields[keys.EXECUTION].struct_value.CopyFrom(account)
    return view


def _hands_over(message: RoomMessage, child_id: str) -> bool:
    """Whether the room message is the one that handed execution `child_id` its work."""
    link = message.meta.get(keys.HANDOFF)
    return isinstance(link, dict) and link.get("child") == child_id
