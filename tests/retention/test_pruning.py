"""Retention prunes exactly what is past its lifetime, and nothing live, on both databases.

One store holds, for each lifetime, rows past it, rows within it, and rows past it that must stay
(a running or input-required task, a conversation a task waits on, a message an agent has not
handled yet); a prune leaves exactly the ones that must stay, a dry run changes nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from a2a.types import Task, TaskState, TaskStatus
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from ranch.config import RetentionConfig
from ranch.db.engine import open_engine
from ranch.db.models import (
    ApiKey,
    Delivery,
    Execution,
    Organization,
    PrunedEvents,
    Room,
    RoomEvent,
    RoomMessage,
    member_sessions,
    push_configs,
    push_outbox,
    ranch_tasks,
    team_conversations,
)
from ranch.retention.pruner import Pruner

pytestmark = pytest.mark.anyio

NOW = 1_800_000_000.0
DAY = 86400.0
OLD = NOW - 20 * DAY
"""Past every lifetime below (10 days)."""
YOUNG = NOW - 5 * DAY
ALL_ON = RetentionConfig(
    tasks=10 * DAY, events=10 * DAY, messages=10 * DAY, conversations=10 * DAY, keys=10 * DAY
)
OWNER = "desk/alice"


def task(
    task_id: str, state: str, when: float | None, owner: str = OWNER, context: str = "ctx"
) -> dict[str, Any]:
    body = Task(id=task_id, context_id=context, status=TaskStatus(state=TaskState.Value(state)))
    return {
        "id": task_id,
        "owner": owner,
        "context_id": context,
        "state": state,
        "updated_ns": None if when is None else int(when * 1e9),
        "body": body.SerializeToString(),
        "runner": None,
    }


TASKS = [
    task("old-completed", "TASK_STATE_COMPLETED", OLD),
    task("old-failed", "TASK_STATE_FAILED", OLD),
    task("old-canceled", "TASK_STATE_CANCELED", OLD),
    task("old-rejected", "TASK_STATE_REJECTED", OLD),
    task("young-completed", "TASK_STATE_COMPLETED", YOUNG),
    task("untimed-completed", "TASK_STATE_COMPLETED", None),
    task("old-working", "TASK_STATE_WORKING", OLD, context="ctx-running"),
    task("old-submitted", "TASK_STATE_SUBMITTED", OLD),
    task("old-input", "TASK_STATE_INPUT_REQUIRED", OLD, context="ctx-waiting"),
    task("old-auth", "TASK_STATE_AUTH_REQUIRED", OLD),
    task("finished-here", "TASK_STATE_COMPLETED", OLD, context="ctx-finished"),
    task("exec-old", "TASK_STATE_COMPLETED", OLD, owner="room:r1", context="r1"),
    task("exec-ready", "TASK_STATE_INPUT_REQUIRED", OLD, owner="room:r1", context="r1"),
]
CONTEXTS = {
    "ctx-idle": OLD,  # no task on it
    "ctx-finished": OLD,  # its task finished
    "ctx-waiting": OLD,  # a task waits for input on it: kept
    "ctx-running": OLD,  # a task runs on it: kept
    "ctx-fresh": YOUNG,
}


async def seed(engine: AsyncEngine) -> None:
    conversations = [
        {"team_id": "desk", "owner": OWNER, "context_id": c, "version": 1, "state": {}, "updated_at": t}
        for c, t in CONTEXTS.items()
    ]
    sessions = [
        {"agent_id": "peer", "owner": OWNER, "context_id": c, "remote_context_id": "r", "updated_at": t}
        for c, t in CONTEXTS.items()
    ]
    async with engine.begin() as connection:
        await connection.execute(insert(ranch_tasks), TASKS)
        await connection.execute(
            insert(push_configs),
            [
                {"task_id": t, "id": "hook", "owner": OWNER, "body": b"x"}
                for t in ("old-completed", "young-completed")
            ],
        )
        await connection.execute(insert(team_conversations), conversations)
        await connection.execute(insert(member_sessions), sessions)
        await connection.execute(
            insert(push_outbox),
            [
                {"task_id": "old-completed", "runner": "r", "body": b"x", "created_at": OLD},
                {"task_id": "young-completed", "runner": "r", "body": b"x", "created_at": NOW - 3600},
            ],
        )
        await connection.execute(insert(Organization), [{"id": "org", "name": "Org"}])
        await connection.execute(insert(Room), [{"id": "r1", "org_id": "org", "last_event": 4}])
        await connection.execute(
            insert(Execution),
            [
                {
                    "id": "exec-old",
                    "room_id": "r1",
                    "agent_id": "a",
                    "status": "completed",
                    "updated_at": OLD,
                },
                {"id": "exec-ready", "room_id": "r1", "agent_id": "b", "status": "ready", "updated_at": OLD},
            ],
        )
        await connection.execute(
            insert(RoomEvent),
            [
                {"room_id": "r1", "cursor": n + 1, "type": "message.created", "data": {}, "created_at": t}
                for n, t in enumerate((OLD, OLD, YOUNG, NOW))
            ],
        )
        messages = {"handled": OLD, "pending": OLD, "running": OLD, "young": YOUNG}
        await connection.execute(
            insert(RoomMessage),
            [
                {"id": m, "room_id": "r1", "sender_kind": "user", "sender_id": "u", "created_at": t}
                for m, t in messages.items()
            ],
        )
        seqs = {row.id: row.seq for row in await connection.execute(select(RoomMessage.id, RoomMessage.seq))}
        await connection.execute(
            insert(Delivery),
            [
                {"id": f"d-{m}", "message_seq": seqs[m], "room_id": "r1", "agent_id": "a", "status": status}
                for m, status in (
                    ("handled", "done"),
                    ("pending", "pending"),
                    ("running", "running"),
                    ("young", "done"),
                )
            ],
        )
        await connection.execute(
            insert(ApiKey),
            [
                key("revoked-long-ago", revoked_at=OLD),
                key("revoked-lately", revoked_at=NOW - DAY),
                key("revoked-unknown-when", revoked_at=None, revoked=True),
                key("expired-long-ago", expires_at=OLD),
                key("expires-later", expires_at=NOW + DAY),
                key("active"),
            ],
        )


def key(
    key_id: str, *, revoked_at: float | None = None, expires_at: float | None = None, revoked: bool = False
) -> dict[str, Any]:
    return {
        "id": key_id,
        "digest": key_id,
        "prefix": "rk_",
        "org_id": "org",
        "owner_kind": "user",
        "owner_id": "u",
        "revoked": revoked or revoked_at is not None,
        "revoked_at": revoked_at,
        "expires_at": expires_at,
    }


async def stored(engine: AsyncEngine) -> dict[str, set[Any]]:
    """What each table holds, by key."""
    tables: dict[str, Sequence[Any]] = {
        "tasks": [ranch_tasks.c.id],
        "push_configs": [push_configs.c.task_id],
        "executions": [Execution.id],
        "events": [RoomEvent.cursor],
        "messages": [RoomMessage.id],
        "deliveries": [Delivery.id],
        "conversations": [team_conversations.c.context_id],
        "member_sessions": [member_sessions.c.context_id],
        "push_outbox": [push_outbox.c.created_at],
        "keys": [ApiKey.id],
    }
    async with engine.connect() as connection:
        return {
            name: set((await connection.scalars(select(*columns))).all()) for name, columns in tables.items()
        }


@pytest.fixture
async def store(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = open_engine(database_url)
    await seed(engine)
    yield engine
    await engine.dispose()


KEPT = {
    "tasks": {
        "young-completed",
        "untimed-completed",
        "old-working",
        "old-submitted",
        "old-input",
        "old-auth",
        "exec-ready",
    },
    "push_configs": {"young-completed"},
    "executions": {"exec-ready"},
    "events": {3, 4},
    "messages": {"pending", "running", "young"},
    "deliveries": {"d-pending", "d-running", "d-young"},
    "conversations": {"ctx-waiting", "ctx-running", "ctx-fresh"},
    "member_sessions": {"ctx-waiting", "ctx-running", "ctx-fresh"},
    "push_outbox": {NOW - 3600},
    "keys": {"revoked-lately", "revoked-unknown-when", "expires-later", "active"},
}
PRUNED = {
    "tasks": 6,  # the four old finished ones, the one on ctx-finished, and the room's execution
    "events": 2,
    "messages": 1,
    "conversations": 2,
    "member_sessions": 2,
    "push_outbox": 1,
    "keys": 2,
}


async def test_a_prune_deletes_exactly_what_is_past_its_lifetime_and_nothing_live(store: AsyncEngine) -> None:
    forgotten: list[str] = []
    pruner = Pruner(store, ALL_ON, clock=lambda: NOW, forget_tasks=forgotten.extend)

    result = await pruner.run()

    assert result.counts == PRUNED and result.finished
    assert await stored(store) == KEPT
    assert sorted(forgotten) == sorted(
        ["old-completed", "old-failed", "old-canceled", "old-rejected", "finished-here", "exec-old"]
    )
    async with store.connect() as connection:  # where a WebSocket cursor of the room may resume
        assert (await connection.execute(select(PrunedEvents.room_id, PrunedEvents.through))).all() == [
            ("r1", 2)
        ]
    again = await pruner.run()
    assert again.total == 0 and await stored(store) == KEPT


async def test_a_dry_run_counts_the_same_rows_and_deletes_nothing(store: AsyncEngine) -> None:
    before = await stored(store)

    counted = await Pruner(store, ALL_ON, clock=lambda: NOW).run(dry_run=True)

    assert counted.dry_run and counted.counts == PRUNED
    assert await stored(store) == before


async def test_by_default_only_push_outbox_leftovers_go_rooms_are_history(store: AsyncEngine) -> None:
    before = await stored(store)

    result = await Pruner(store, RetentionConfig(), clock=lambda: NOW).run()

    assert result.counts == {"push_outbox": 1}  # a week: the leftover of 20 days ago is past it
    assert (await stored(store))["push_outbox"] == {NOW - 3600}
    later = await Pruner(store, RetentionConfig(push_outbox="1h"), clock=lambda: NOW + 7200).run()
    assert later.counts == {"push_outbox": 1}
    assert await stored(store) == {**before, "push_outbox": set()}


async def test_a_lifetime_off_prunes_nothing_of_its_kind(store: AsyncEngine) -> None:
    before = await stored(store)

    result = await Pruner(store, RetentionConfig(tasks="10d", push_outbox=None), clock=lambda: NOW).run()

    assert result.counts == {"tasks": 6}
    after = await stored(store)
    assert after["tasks"] == KEPT["tasks"]
    assert {k: v for k, v in after.items() if k not in ("tasks", "push_configs", "executions")} == {
        k: v for k, v in before.items() if k not in ("tasks", "push_configs", "executions")
    }


async def test_batches_are_small_and_a_round_past_its_budget_leaves_the_rest(store: AsyncEngine) -> None:
    async with store.begin() as connection:
        await connection.execute(
            insert(RoomEvent),
            [
                {"room_id": "r1", "cursor": 100 + n, "type": "x", "data": {}, "created_at": OLD}
                for n in range(9)
            ],
        )
    small = RetentionConfig(events="10d", push_outbox=None, batch=4)
    stopped = await Pruner(store, small, clock=lambda: NOW).run(budget=0)
    assert not stopped.finished and stopped.counts == {"events": 0}

    seen: list[int] = []
    result = await Pruner(store, small, clock=lambda: NOW).run(
        progress=lambda _label, count: seen.append(count)
    )

    assert result.finished and result.counts == {"events": 11}
    assert seen == [4, 8, 11]  # three transactions of at most 4 rows
    assert (await stored(store))["events"] == {3, 4}


def test_lifetimes_come_from_the_config_with_units_and_off() -> None:
    config = RetentionConfig.model_validate({"tasks": "30d", "events": "12h", "keys": 600, "messages": "off"})
    assert (config.tasks, config.events, config.keys, config.messages) == (30 * DAY, 12 * 3600, 600, None)
