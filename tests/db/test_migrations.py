"""Migrations: a fresh database reaches head on the first start, one made by ranch 0.1 keeps its
tasks, and a database already at head costs a start no migration work."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from a2a.types import Task, TaskState, TaskStatus
from alembic import command
from sqlalchemy import inspect, text
from sqlalchemy.ext.asyncio import async_sessionmaker

from _support.databases import run
from _support.hubkit import ADMIN_KEY, Api
from _support.servers import ServerThread
from ranch.config import parse_config
from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.db.models import ApiKey
from ranch.hub.app import Settings, create_app
from ranch.tasks.store import SqlTaskStore, owner_of
from ranch.tasks.store import owner_context as _ctx

pytestmark = pytest.mark.anyio

RANCH_0_1_TABLE = """
CREATE TABLE ranch_tasks (
    id VARCHAR(255) NOT NULL PRIMARY KEY, owner VARCHAR(255) NOT NULL, context_id VARCHAR(255) NOT NULL,
    state VARCHAR(32) NOT NULL, updated_ns BIGINT, body BLOB NOT NULL
)
"""


async def test_a_database_from_ranch_0_1_is_upgraded_with_its_tasks(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    store = SqlTaskStore(engine, owner_of)
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    async with engine.begin() as connection:  # 0.1's only table, and one task in it
        await connection.execute(text(RANCH_0_1_TABLE))
        await connection.execute(
            text("INSERT INTO ranch_tasks VALUES ('t1', 'someone', 'c1', :state, NULL, :body)"),
            {"state": "TASK_STATE_COMPLETED", "body": task.SerializeToString()},
        )
    assert await migrate.current(engine) is None

    await migrate.upgrade(engine)
    await migrate.upgrade(engine)  # twice is a no-op

    assert await migrate.current(engine) == migrate.head()
    async with engine.connect() as connection:
        tables = set(await connection.run_sync(lambda sync: inspect(sync).get_table_names()))
    assert {"rooms", "messages", "executions", "events", "deliveries", "agents", "ranch_tasks"} <= tables
    assert "ranch_push_configs" in tables
    assert await store.get("t1", _ctx("someone")) == task
    await engine.dispose()


async def test_keys_from_before_0011_are_kept_and_made_by_no_key(empty_database_url: str) -> None:
    """0011 adds `api_keys.parent_id`: a key that existed already keeps working, made by no key."""
    engine = open_engine(empty_database_url)
    await migrate.upgrade(engine, "0010")
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO organizations (id, name, allowed_agent_urls, created_at)"
                " VALUES ('o', 'O', '[]', 0)"
            )
        )
        await connection.execute(
            text(
                "INSERT INTO api_keys (id, digest, prefix, org_id, owner_kind, owner_id, created_at, revoked)"
                " VALUES ('k1', 'd1', 'rk_abcd', 'o', 'user', 'u1', 0, false)"
            )
        )

    await migrate.upgrade(engine)

    async with async_sessionmaker(engine)() as session:
        key = await session.get(ApiKey, "k1")
    assert key is not None and key.parent_id is None and not key.revoked
    async with engine.connect() as connection:
        indexes = await connection.run_sync(lambda sync: inspect(sync).get_indexes("api_keys"))
    assert {"ix_api_keys_parent_id", "api_keys_owner"} <= {index["name"] for index in indexes}
    await engine.dispose()


CONFIG = """
agents:
  - {id: echo, kind: echo}
"""


def test_the_first_start_on_an_empty_database_migrates_it(empty_database_url: str) -> None:
    """What a user's first `ranch serve` does: the server makes every table, then serves."""
    settings = Settings(database_url=empty_database_url, admin_key=ADMIN_KEY, announce=lambda _line: None)
    with ServerThread(create_app(parse_config(CONFIG), settings)) as hub:  # not serve_ranch: no template
        assert httpx.get(f"{hub.url}/healthz", timeout=30).status_code == 200
        admin = Api(hub.url, ADMIN_KEY)
        room = admin.post("/rooms", {"title": "Ops"})["id"]
        assert admin.get(f"/rooms/{room}")["title"] == "Ops"
    assert run(lambda: revision_of(empty_database_url)) == migrate.head()


async def revision_of(url: str) -> str | None:
    engine = open_engine(url)
    try:
        return await migrate.current(engine)
    finally:
        await engine.dispose()


async def test_a_database_at_head_is_not_migrated_again(
    empty_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every start after the first finds the database at head: one query, no migration scripts run."""
    engine = open_engine(empty_database_url)
    await migrate.upgrade(engine)
    ran: list[str] = []
    monkeypatch.setattr(command, "upgrade", lambda _config, revision: ran.append(revision))

    await migrate.upgrade(engine)

    assert ran == []
    assert await migrate.current(engine) == migrate.head()
    await engine.dispose()


def test_the_head_a_start_compares_with_is_the_newest_script() -> None:
    """A start at head reads `alembic_version` without alembic: against `HEAD`, which must name the
    newest script (a migration added without moving it would be skipped at every start)."""
    assert migrate.HEAD == migrate.scripts_head()


async def test_the_revision_is_read_as_alembic_reads_it(empty_database_url: str) -> None:
    engine = open_engine(empty_database_url)
    try:
        assert await migrate.current(engine) is None  # no alembic_version table yet
        await migrate.upgrade(engine, "0016")
        assert await migrate.current(engine) == "0016"
        await migrate.upgrade(engine)
        assert await migrate.current(engine) == migrate.HEAD
    finally:
        await engine.dispose()
