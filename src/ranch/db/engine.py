"""One async engine per server, shared by the task store and the rooms."""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_S = 30
"""How long a SQLite writer waits for another's lock before failing."""


def open_engine(url: str, *, busy_timeout: float = SQLITE_BUSY_TIMEOUT_S) -> AsyncEngine:
    """The engine for `url`; on SQLite, a writer waits up to `busy_timeout` s for another's lock."""
    if url.startswith("sqlite"):
        engine = create_async_engine(url, connect_args={"timeout": busy_timeout})
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    return create_async_engine(url, pool_pre_ping=True)


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    """WAL lets readers run while a turn is written; NORMAL sync is safe with WAL; foreign keys on."""
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()
