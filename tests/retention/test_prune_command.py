"""`ranch db prune [--dry-run]`: one prune, its counts printed; a dry run changes nothing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
from a2a.types import Task, TaskState, TaskStatus
from sqlalchemy import insert, select

from _support.servers import Run
from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.db.models import Organization, Room, RoomEvent, ranch_tasks

DAY = 86400.0


def task(task_id: str, state: str, age_days: float) -> dict[str, Any]:
    body = Task(id=task_id, context_id="ctx", status=TaskStatus(state=TaskState.Value(state)))
    when = int((time.time() - age_days * DAY) * 1e9)
    row = {"id": task_id, "owner": "desk/alice", "context_id": "ctx", "state": state, "updated_ns": when}
    return {**row, "body": body.SerializeToString(), "runner": None}


def seed(url: str) -> None:
    """Tasks and events, old and new; the old working task stays whatever the lifetime."""

    async def fill() -> None:
        engine = open_engine(url)
        try:
            async with engine.begin() as connection:
                await connection.execute(
                    insert(ranch_tasks),
                    [
                        task("old-1", "TASK_STATE_COMPLETED", 40),
                        task("old-2", "TASK_STATE_FAILED", 40),
                        task("old-working", "TASK_STATE_WORKING", 40),
                        task("new", "TASK_STATE_COMPLETED", 1),
                    ],
                )
                await connection.execute(insert(Organization), [{"id": "org", "name": "Org"}])
                await connection.execute(insert(Room), [{"id": "r", "org_id": "org", "last_event": 3}])
                await connection.execute(
                    insert(RoomEvent),
                    [
                        {
                            "room_id": "r",
                            "cursor": n + 1,
                            "type": "x",
                            "data": {},
                            "created_at": time.time() - age,
                        }
                        for n, age in enumerate((40 * DAY, 40 * DAY, 60))
                    ],
                )
        finally:
            await engine.dispose()

    anyio.run(fill)


def stored(url: str) -> tuple[set[str], set[int]]:
    async def read() -> tuple[set[str], set[int]]:
        engine = open_engine(url)
        try:
            async with engine.connect() as connection:
                tasks: set[str] = set((await connection.scalars(select(ranch_tasks.c.id))).all())
                events = set((await connection.scalars(select(RoomEvent.cursor))).all())
                return tasks, events
        finally:
            await engine.dispose()

    return anyio.run(read)


def test_a_dry_run_prints_the_counts_and_changes_nothing(database_url: str, ranch: Run) -> None:
    seed(database_url)
    before = stored(database_url)

    dry = ranch(
        "db",
        "prune",
        "--dry-run",
        "--db",
        database_url,
        "--retention-tasks",
        "30d",
        "--retention-events",
        "30d",
    )

    assert dry.returncode == 0, dry.stderr
    assert "tasks                     2 would be deleted" in dry.stdout
    assert "events                    2 would be deleted" in dry.stdout
    assert "4 row(s) would be deleted" in dry.stdout and "nothing changed" in dry.stdout
    assert stored(database_url) == before


def test_a_prune_deletes_what_the_config_and_flags_say_and_prints_the_counts(
    database_url: str, ranch: Run, tmp_path: Path
) -> None:
    seed(database_url)
    config = tmp_path / "ranch.yaml"
    config.write_text("agents: []\nretention:\n  tasks: 30d\n  events: 1d\n")

    done = ranch("db", "prune", "--db", database_url, "--config", str(config), "--retention-events", "off")

    assert done.returncode == 0, done.stderr
    assert "tasks                     2 deleted" in done.stdout
    assert "events" not in done.stdout  # turned off by its flag, over the file
    assert stored(database_url) == ({"old-working", "new"}, {1, 2, 3})


def test_a_bad_lifetime_is_refused_naming_it_and_nothing_is_pruned(ranch: Run, tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    anyio.run(_migrated, url)
    seed(url)
    before = stored(url)

    unit = ranch("db", "prune", "--db", url, "--retention-tasks", "3 days")
    short = ranch("db", "prune", "--db", url, "--retention-push-outbox", "60")

    assert unit.returncode == 2 and "--retention-tasks" in unit.stderr and "3 days" in unit.stderr
    assert short.returncode == 1
    assert (
        "retention.push_outbox: at least 3600 s (1h)" in short.stderr
        and "(--retention-push-outbox)" in short.stderr
    )
    assert stored(url) == before


def test_a_database_behind_the_newest_schema_is_not_pruned(ranch: Run, tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    anyio.run(_migrated, url, "0014")

    refused = ranch("db", "prune", "--dry-run", "--db", url, "--retention-tasks", "30d")

    assert refused.returncode == 1
    assert "is at 0014" in refused.stderr and "run `ranch db upgrade` first" in refused.stderr


async def _migrated(url: str, revision: str = "head") -> None:
    engine = open_engine(url)
    try:
        await migrate.upgrade(engine, revision)
    finally:
        await engine.dispose()
