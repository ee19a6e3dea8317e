"""Fresh databases already at head: one migrated template per process (per xdist worker), copied
(SQLite) or cloned with `CREATE DATABASE … TEMPLATE` (PostgreSQL) for each test that wants one.

Migrating an empty database was about a third of a test server's start; a copy of a migrated file
costs a millisecond. The server still runs its migration step and finds the database at head. What
users do on their first start (an empty database migrated, an old one upgraded) is tested on
purpose on empty databases: `serve_ranch(..., template=False)`, the `empty_database_url` fixture.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import shutil
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy.engine import make_url

from ranch.db import migrate
from ranch.db.engine import open_engine

T = TypeVar("T")

POSTGRES = "postgres@127.0.0.1:5432"
"""The PostgreSQL every test uses: its superuser, trusted, on the default port."""
POSTGRES_ADMIN = f"postgresql://{POSTGRES}/postgres"
CLONE_WAIT = 30.0
"""Seconds a clone waits for the template's last session to end (it must have none to be copied)."""
SQLITE_FILES = ("", "-wal", "-shm")
"""A SQLite database's files: the main one, then any write-ahead log and its index."""

_lock = threading.Lock()
_templates: dict[str, Any] = {}


def run(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to its end on an event loop of its own, in a thread: the caller may be in one."""
    with concurrent.futures.ThreadPoolExecutor(1) as thread:
        return thread.submit(lambda: asyncio.run(make())).result()


async def _migrate(url: str) -> None:
    engine = open_engine(url)
    try:
        await migrate.upgrade(engine)
    finally:
        await engine.dispose()  # a PostgreSQL template must have no session left to be cloned


# -- SQLite ---------------------------------------------------------------------------------------


def sqlite_template() -> Path:
    """This process's migrated SQLite file, made on first use, removed at exit; never opened again."""
    with _lock:
        if "sqlite" not in _templates:
            folder = Path(tempfile.mkdtemp(prefix="ranch-template-"))
            atexit.register(shutil.rmtree, folder, True)
            path = folder / "hub.db"
            run(lambda: _migrate(f"sqlite+aiosqlite:///{path}"))
            with contextlib.closing(sqlite3.connect(path)) as connection:
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # all of it in the main file
            _templates["sqlite"] = path
        template: Path = _templates["sqlite"]
        return template


def migrated_sqlite(path: Path) -> Path:
    """`path` made a fresh SQLite database at head (a copy of the template); returns it."""
    template = sqlite_template()
    for suffix in SQLITE_FILES:
        source = template.with_name(template.name + suffix)
        if source.exists():
            shutil.copyfile(source, path.with_name(path.name + suffix))
    return path


def seed(database: Path | str) -> None:
    """A SQLite file that does not exist yet (in a folder that does) becomes a copy of the template;
    anything else is left as it is (a file already there, PostgreSQL, an in-memory database)."""
    if isinstance(database, str):
        url = make_url(database)
        if not url.drivername.startswith("sqlite") or not url.database or url.database == ":memory:":
            return
        database = Path(url.database)
    if not database.exists() and database.parent.is_dir():
        migrated_sqlite(database)


# -- PostgreSQL -----------------------------------------------------------------------------------


def postgres_url(name: str) -> str:
    """ranch's URL of the database `name` on the test PostgreSQL."""
    return f"postgresql+asyncpg://{POSTGRES}/{name}"


async def postgres(statement: str) -> None:
    """Run one statement as the PostgreSQL superuser, on the `postgres` database."""
    import asyncpg

    connection = await asyncpg.connect(POSTGRES_ADMIN, timeout=5)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


def postgres_template() -> str:
    """The name of this process's migrated template database, made on first use (unique per process,
    so xdist workers never share one); `drop_postgres_databases` removes it."""
    with _lock:
        if "postgresql" not in _templates:
            name = f"ranch_template_{uuid.uuid4().hex[:12]}"
            run(lambda: postgres(f'CREATE DATABASE "{name}"'))
            try:
                run(lambda: _migrate(postgres_url(name)))
            except BaseException:
                run(lambda: postgres(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                raise
            _templates["postgresql"] = name
            atexit.register(drop_postgres_databases)
        template: str = _templates["postgresql"]
        return template


async def clone(name: str, template: str) -> None:
    """CREATE DATABASE `name` as a copy of `template`, once the template has no session left (the
    engine that migrated it may take a moment to close its last connection)."""
    import asyncpg

    deadline = time.monotonic() + CLONE_WAIT
    while True:
        try:
            await postgres(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
            return
        except asyncpg.ObjectInUseError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


_dropper = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="drop-database")
_dropping: list[concurrent.futures.Future[None]] = []


def drop_later(name: str) -> None:
    """Drop the database `name` in a thread of its own: a DROP DATABASE waits for a checkpoint and
    more (0.5 to 3 s measured), which the next test need not wait for."""
    drop = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
    _dropping.append(_dropper.submit(lambda: asyncio.run(postgres(drop))))


@contextlib.contextmanager
def fresh_postgres(*, empty: bool = False) -> Iterator[str]:
    """A new database on the test PostgreSQL, dropped afterwards (without waiting): a clone of the
    worker's migrated template (CREATE DATABASE … TEMPLATE), or `empty`."""
    name = f"ranch_test_{uuid.uuid4().hex[:12]}"
    try:
        if empty:
            asyncio.run(postgres(f'CREATE DATABASE "{name}"'))
        else:
            asyncio.run(clone(name, postgres_template()))
    except (TimeoutError, OSError) as exc:
        pytest.fail(f"this test needs PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth): {exc}")
    try:
        yield postgres_url(name)
    finally:
        drop_later(name)


def drop_postgres_databases() -> None:
    """Wait for the drops asked for, then drop this process's template database, if it made one."""
    while _dropping:
        _dropping.pop().result(timeout=120)
    with _lock:
        name = _templates.pop("postgresql", None)
    if name is not None:  # at the session's end or the process's (no event loop running; no new threads)
        asyncio.run(postgres(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
