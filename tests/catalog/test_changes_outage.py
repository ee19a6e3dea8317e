"""A replica deaf to the others re-checks its open connections' keys in the database; when the
database is out too, the operator is told once (not at DEBUG), and the re-check goes on until it
answers, ending then the connections whose key no longer stands. A failure that is no outage (a
bug) is logged at ERROR with its traceback, once, and does not stop the re-check either."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from _support.servers import free_port
from ranch.catalog import changes as catalog_changes
from ranch.catalog.changes import Changes
from ranch.db.engine import open_engine
from ranch.db.models import Base
from ranch.exceptions import Unauthorized
from ranch.fanout import Listening
from ranch.identity.security import build_security

pytestmark = pytest.mark.anyio

ROUNDS = 3
"""Failed re-checks a test waits for: the failure is told once, however many there are."""


class DeafFanout:
    """A shared fan-out that is disconnected (Redis down): its listener hears nothing."""

    shared = True
    connected = False

    async def publish(self, topic: str, data: bytes) -> None:
        raise AssertionError("nothing is published here")

    @asynccontextmanager
    async def listen(self, topic: str) -> AsyncIterator[Listening]:
        send, receive = anyio.create_memory_object_stream[bytes](1)
        with send, receive:
            yield receive


class Database:
    """What `KeyResolver` asks for its sessions: `failing` ones until `mend`, counting each ask."""

    def __init__(self, failing: AsyncEngine | None) -> None:
        self._failing = failing
        self._working: AsyncEngine | None = None
        self.mended = False
        self.asked = 0
        self.failed_enough = anyio.Event()

    def __call__(self) -> async_sessionmaker[AsyncSession]:
        if self.mended:
            assert self._working is not None
            return async_sessionmaker(self._working)
        self.asked += 1
        if self.asked >= ROUNDS:
            self.failed_enough.set()
        if self._failing is None:
            raise RuntimeError("a bug in the re-check")
        return async_sessionmaker(self._failing)

    async def mend(self, tmp_path: Path) -> None:
        """A database that answers (with no keys at all: every open key no longer exists)."""
        self._working = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'mended.db'}")
        async with self._working.begin() as connection:
            await connection.run_sync(Base.metadata.create_all)
        self.mended = True

    async def aclose(self) -> None:
        for engine in (self._failing, self._working):
            if engine is not None:
                await engine.dispose()


def sqlite_that_cannot_open(tmp_path: Path) -> AsyncEngine:
    return open_engine(f"sqlite+aiosqlite:///{tmp_path / 'gone' / 'hub.db'}")  # no such folder


def postgres_port_closed(tmp_path: Path) -> AsyncEngine:
    return open_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/ranch")


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(catalog_changes, "DEAF_RECHECK", 0.01)
    yield


async def recheck_through(database: Database, tmp_path: Path) -> Unauthorized:
    """Follow a deaf fan-out with one connection open on a key, through `database`'s failures
    (ROUNDS of them), then mend it: why the connection was ended."""
    security = build_security("keys", set(), database, session_ttl=None)  # type: ignore[arg-type]
    ended: list[Unauthorized] = []
    gone = anyio.Event()

    def end(reason: Unauthorized) -> None:
        ended.append(reason)
        gone.set()

    async def resync() -> None:
        return None

    security.live.open("key-1", None, end)
    try:
        async with anyio.create_task_group() as group:
            await group.start(Changes(security).follow, DeafFanout(), resync, lambda room, org: None)
            with anyio.fail_after(10):
                await database.failed_enough.wait()
                assert not ended  # nothing was ended on a failure
                await database.mend(tmp_path)
                await gone.wait()
            group.cancel_scope.cancel()
    finally:
        await database.aclose()
    return ended[0]


def told(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """What the operator reads (INFO and above) of ranch's log."""
    return [r for r in caplog.records if r.levelno >= logging.INFO and r.name.startswith("ranch")]


@pytest.mark.parametrize("failing", [sqlite_that_cannot_open, postgres_port_closed])
async def test_a_database_outage_is_told_once_and_the_recheck_goes_on_until_it_answers(
    quick: None, tmp_path: Path, caplog: pytest.LogCaptureFixture, failing: Any
) -> None:
    caplog.set_level(logging.DEBUG, logger="ranch")
    database = Database(failing(tmp_path))
    reason = await recheck_through(database, tmp_path)
    assert "no longer exists" in str(reason)  # asked again once it answered: the key is gone
    assert database.asked >= ROUNDS
    records = told(caplog)
    assert len(records) == 2, [(r.levelname, r.getMessage()) for r in records]  # once, and its end
    outage, recovered = records
    assert outage.levelno >= logging.WARNING and "re-checking open connections' keys" in outage.message
    assert "unavailable" in outage.getMessage().lower(), outage.getMessage()
    assert "re-checked again" in recovered.message


async def test_a_bug_is_logged_with_its_traceback_once_and_the_recheck_goes_on(
    quick: None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="ranch")
    database = Database(None)  # asking it for sessions raises RuntimeError
    await recheck_through(database, tmp_path)
    records = told(caplog)
    assert len(records) == 2, [(r.levelname, r.getMessage()) for r in records]
    bug, recovered = records
    assert bug.levelno == logging.ERROR and "a bug" in bug.message
    assert bug.exc_info is not None and isinstance(bug.exc_info[1], RuntimeError)
    assert "re-checked again" in recovered.message
