"""What each lifetime prunes, a batch at a time, and what it never prunes.

Each `Part` finds up to a batch of rows past their lifetime on an index (migration 0015), then
deletes them with the same conditions again, in the caller's transaction: a row that came back to
life between the read and the delete (it cannot, but a delete never trusts a read) stays. Never
pruned: a task that is not finished (running, input-required), a conversation or member session
on whose context such a task is, a message an agent has not handled yet (nor its delivery).
tests/db/test_query_plans.py checks that every read and delete here uses an index.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, Table, and_, case, delete, exists, func, or_, select, tuple_
from sqlalchemy.ext.asyncio import AsyncConnection

from ranch.db.models import (
    ApiKey,
    Delivery,
    DeliveryStatus,
    Execution,
    ExecutionStatus,
    PrunedEvents,
    RoomEvent,
    RoomMessage,
    member_sessions,
    push_configs,
    push_outbox,
    ranch_tasks,
    team_conversations,
)
from ranch.db.upsert import insert_for

FINISHED = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED")
"""Task states that never change again: only these tasks are pruned."""
FINAL_EXECUTIONS = (
    ExecutionStatus.COMPLETED.value,
    ExecutionStatus.FAILED.value,
    ExecutionStatus.CANCELED.value,
)
UNDELIVERED = (DeliveryStatus.PENDING.value, DeliveryStatus.RUNNING.value)

Batch = Callable[[AsyncConnection, float, int], Awaitable[tuple[int, int]]]
"""Delete up to `limit` rows older than `cutoff` (seconds since the epoch): (rows found, rows deleted)."""


@dataclass(frozen=True)
class Part:
    """One table a lifetime prunes."""

    label: str
    """How counts, logs and the metric name it (`tasks`, `member_sessions`)."""
    lifetime: str
    """The `retention:` setting that rules it."""
    count: Callable[[float], Select[Any]]
    """What `--dry-run` counts: the rows a full prune would delete now."""
    batch: Batch


def parts(forget_tasks: Callable[[Sequence[str]], None] | None = None) -> list[Part]:
    """Every part, in the order a round prunes them; `forget_tasks` hears the ids of pruned tasks
    (the hub drops them from its cache of recent tasks)."""
    return [
        Part("tasks", "tasks", _tasks_count, _tasks_batch(forget_tasks)),
        Part("events", "events", _events_count, _events_batch),
        Part("messages", "messages", _messages_count, _messages_batch),
        Part(
            "conversations", "conversations", _idle_count(team_conversations), _idle_batch(team_conversations)
        ),
        Part("member_sessions", "conversations", _idle_count(member_sessions), _idle_batch(member_sessions)),
        Part("push_outbox", "push_outbox", _outbox_count, _outbox_batch),
        Part("keys", "keys", _keys_count, _keys_batch),
    ]


# -- finished tasks, with their push configs and (a room's) execution rows ------------------------


def finished_before(cutoff: float) -> list[Any]:
    """A finished task whose last status change is older than `cutoff` (untimed ones are kept)."""
    return [ranch_tasks.c.state.in_(FINISHED), ranch_tasks.c.updated_ns < int(cutoff * 1e9)]


def _tasks_count(cutoff: float) -> Select[Any]:
    return select(func.count()).select_from(ranch_tasks).where(*finished_before(cutoff))


def _tasks_batch(forget: Callable[[Sequence[str]], None] | None) -> Batch:
    async def batch(connection: AsyncConnection, cutoff: float, limit: int) -> tuple[int, int]:
        read = select(ranch_tasks.c.id).where(*finished_before(cutoff)).limit(limit)
        found: Sequence[str] = (await connection.scalars(read)).all()
        if not found:
            return 0, 0
        gone = await connection.execute(
            delete(ranch_tasks)
            .where(ranch_tasks.c.id.in_(found), *finished_before(cutoff))
            .returning(ranch_tasks.c.id, ranch_tasks.c.owner)
        )
        rows = gone.all()
        ids = [row.id for row in rows]
        if ids:
            await connection.execute(delete(push_configs).where(push_configs.c.task_id.in_(ids)))
            executions = [row.id for row in rows if str(row.owner).startswith("room:")]
            if executions:  # an execution is its task: its row goes too (rooms/executions.py)
                await connection.execute(
                    delete(Execution)
                    .where(Execution.id.in_(executions), Execution.status.in_(FINAL_EXECUTIONS))
                    .execution_options(synchronize_session=False)
                )
            if forget is not None:
                forget(ids)
        return len(found), len(ids)

    return batch


# -- room events and messages -----------------------------------------------------------------------


def _events_count(cutoff: float) -> Select[Any]:
    return select(func.count()).select_from(RoomEvent).where(RoomEvent.created_at < cutoff)


async def _events_batch(connection: AsyncConnection, cutoff: float, limit: int) -> tuple[int, int]:
    old = RoomEvent.created_at < cutoff
    found = (await connection.scalars(select(RoomEvent.seq).where(old).limit(limit))).all()
    if not found:
        return 0, 0
    gone = (
        await connection.execute(
            delete(RoomEvent)
            .where(RoomEvent.seq.in_(found), old)
            .returning(RoomEvent.room_id, RoomEvent.cursor)
        )
    ).all()
    through: dict[str, int] = {}
    for room_id, cursor in gone:
        through[room_id] = max(cursor, through.get(room_id, 0))
    if through:
        await connection.execute(
            _pruned_through(connection.dialect.name),
            [{"room_id": room_id, "through": cursor} for room_id, cursor in through.items()],
        )
    return len(found), len(gone)


def _pruned_through(dialect_name: str) -> Any:
    """Note how far each room's events are pruned (the newest pruned cursor wins)."""
    statement = insert_for(dialect_name)(PrunedEvents)
    newer = statement.excluded.through > PrunedEvents.through
    return statement.on_conflict_do_update(
        index_elements=[PrunedEvents.room_id],
        set_={"through": case((newer, statement.excluded.through), else_=PrunedEvents.through)},
    )


def _old_handled_messages(cutoff: float) -> list[Any]:
    """Messages posted before `cutoff` that no agent still has to handle."""
    undelivered = exists().where(Delivery.message_seq == RoomMessage.seq, Delivery.status.in_(UNDELIVERED))
    return [RoomMessage.created_at < cutoff, ~undelivered]


def _messages_count(cutoff: float) -> Select[Any]:
    return select(func.count()).select_from(RoomMessage).where(*_old_handled_messages(cutoff))


async def _messages_batch(connection: AsyncConnection, cutoff: float, limit: int) -> tuple[int, int]:
    where = _old_handled_messages(cutoff)
    found = (await connection.scalars(select(RoomMessage.seq).where(*where).limit(limit))).all()
    if not found:
        return 0, 0
    gone = (
        await connection.scalars(
            delete(RoomMessage).where(RoomMessage.seq.in_(found), *where).returning(RoomMessage.seq)
        )
    ).all()
    if gone:  # their deliveries, all handled (`where`), point at nothing now
        handled = Delivery.status == DeliveryStatus.DONE.value
        await connection.execute(delete(Delivery).where(handled, Delivery.message_seq.in_(gone)))
    return len(found), len(gone)


# -- idle conversations and members' sessions ---------------------------------------------------------


def _idle(table: Table, cutoff: float) -> list[Any]:
    """Rows of `table` written last before `cutoff` on whose (owner, context) no task is unfinished."""
    waits = exists().where(
        ranch_tasks.c.owner == table.c.owner,
        ranch_tasks.c.context_id == table.c.context_id,
        ranch_tasks.c.state.not_in(FINISHED),
    )
    return [table.c.updated_at < cutoff, ~waits]


def _idle_count(table: Table) -> Callable[[float], Select[Any]]:
    def count(cutoff: float) -> Select[Any]:
        return select(func.count()).select_from(table).where(*_idle(table, cutoff))

    return count


def _idle_batch(table: Table) -> Batch:
    key = list(table.primary_key.columns)

    async def batch(connection: AsyncConnection, cutoff: float, limit: int) -> tuple[int, int]:
        where = _idle(table, cutoff)
        found = [tuple(row) for row in (await connection.execute(select(*key).where(*where).limit(limit)))]
        if not found:
            return 0, 0
        gone = await connection.execute(delete(table).where(tuple_(*key).in_(found), *where))
        return len(found), int(gone.rowcount)

    return batch


# -- push-outbox leftovers and dead keys ----------------------------------------------------------------


def _outbox_count(cutoff: float) -> Select[Any]:
    return select(func.count()).select_from(push_outbox).where(push_outbox.c.created_at < cutoff)


async def _outbox_batch(connection: AsyncConnection, cutoff: float, limit: int) -> tuple[int, int]:
    old = push_outbox.c.created_at < cutoff
    found: Sequence[int] = (await connection.scalars(select(push_outbox.c.seq).where(old).limit(limit))).all()
    if not found:
        return 0, 0
    gone = await connection.execute(delete(push_outbox).where(push_outbox.c.seq.in_(found), old))
    return len(found), int(gone.rowcount)


def _revoked(cutoff: float) -> Any:
    return and_(ApiKey.revoked_at.is_not(None), ApiKey.revoked_at < cutoff)


def _expired(cutoff: float) -> Any:
    return and_(ApiKey.expires_at.is_not(None), ApiKey.expires_at < cutoff)


def _keys_count(cutoff: float) -> Select[Any]:
    return select(func.count()).select_from(ApiKey).where(or_(_revoked(cutoff), _expired(cutoff)))


async def _keys_batch(connection: AsyncConnection, cutoff: float, limit: int) -> tuple[int, int]:
    found = list((await connection.scalars(select(ApiKey.id).where(_revoked(cutoff)).limit(limit))).all())
    if len(found) < limit:  # each read on its own partial index
        expired = select(ApiKey.id).where(_expired(cutoff), ApiKey.id.not_in(found)).limit(limit - len(found))
        found += (await connection.scalars(expired)).all()
    if not found:
        return 0, 0
    dead = or_(_revoked(cutoff), _expired(cutoff))
    gone = await connection.execute(
        delete(ApiKey).where(ApiKey.id.in_(found), dead).execution_options(synchronize_session=False)
    )
    return len(found), int(gone.rowcount)
