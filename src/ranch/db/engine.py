"""One async engine per server, shared by the task store and the rooms.

A database that cannot be used (locked, unreachable, its connection cut) is one kind of failure
everywhere: `unavailable` tells it apart from a bug, and `cause_of` says what it was without the
SQL statement or its parameters (which hold what callers wrote). The engine itself hides the
parameters in its errors too (`hide_parameters`), so no traceback logs a message's text.
"""

from __future__ import annotations

import json
import logging
import time
from functools import partial
from typing import Any

import anyio
import orjson
from sqlalchemy import event
from sqlalchemy import exc as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from ranch.exceptions import DatabaseUnavailable

logger = logging.getLogger(__name__)
SQLITE_BUSY_TIMEOUT_S = 30
"""How long a SQLite writer waits for another's lock before failing."""
UNAVAILABLE = (sa.OperationalError, sa.InterfaceError, sa.DisconnectionError, sa.TimeoutError, OSError)
"""What a database that cannot be used raises: locked or busy, a connection refused or cut, a pool
that has no connection to give; a driver's connect failure (asyncpg) is a plain OSError."""


PING_AFTER_IDLE = 1.0
"""Seconds a PostgreSQL connection may rest in the pool before it is pinged on its way out
(`_ping_rested`)."""
DISPOSE_WITHIN = 5.0
"""Seconds a stopping server waits for its database connections to close."""


async def dispose(engine: AsyncEngine, within: float = DISPOSE_WITHIN) -> None:
    """Close the engine's connections at shutdown; what does not close within `within` seconds is left
    to the process's exit instead of holding it (under load, a SQLite query cancelled at shutdown can
    leave aiosqlite's close waiting on a worker thread that no longer answers)."""
    with anyio.move_on_after(within) as waited:
        await engine.dispose()
    if waited.cancelled_caught:
        logger.warning("the database connections did not close within %.0f s; left to the exit", within)


def open_engine(url: str, *, busy_timeout: float = SQLITE_BUSY_TIMEOUT_S) -> AsyncEngine:
    """The engine for `url`; on SQLite, a writer waits up to `busy_timeout` s for another's lock.
    JSON columns are written and read with orjson (the standard library's json was a few percent
    of a room post's CPU: a message has four JSON columns, its event one)."""
    options: dict[str, Any] = {"hide_parameters": True, "json_serializer": json_text}
    options["json_deserializer"] = orjson.loads
    if url.startswith("sqlite"):
        engine = create_async_engine(url, connect_args={"timeout": busy_timeout}, **options)
        event.listen(engine.sync_engine, "connect", _sqlite_pragmas)
        return engine
    engine = create_async_engine(url, **options)
    event.listen(engine.sync_engine, "checkin", _rested_since)
    event.listen(engine.sync_engine, "checkout", partial(_ping_rested, engine.dialect))
    return engine


def _rested_since(_connection: Any, record: Any) -> None:
    record.info["rested_since"] = time.monotonic()


def _ping_rested(dialect: Dialect, connection: Any, record: Any, _proxy: Any) -> None:
    """Ping a connection that rested in the pool over `PING_AFTER_IDLE` s before it is used: one
    the database dropped meanwhile (a restart, a failover) is replaced, unseen by the caller.

    SQLAlchemy's `pool_pre_ping` pings at every checkout, and its asyncpg ping is three round
    trips (BEGIN, `;`, ROLLBACK): three of a batch of room posts' ten, and 10 of a lone post's 30 ms
    with the database 1 ms away (bench/README.md "Rooms at scale, fewer round trips"). A connection in use
    goes back to the pool and out again within milliseconds; one the database dropped while it
    was in use fails that statement, which SQLAlchemy reports as a disconnect, and then the pool
    replaces every connection it holds."""
    rested = record.info.get("rested_since")
    if rested is None or time.monotonic() - rested < PING_AFTER_IDLE:
        return
    try:
        dialect.do_ping(connection)
    except Exception as exc:  # the pool retries the checkout on a new connection
        raise sa.DisconnectionError(f"a pooled connection failed its ping: {cause_of(exc)}") from exc


def json_text(value: Any) -> str:
    """A JSON column's text (keys that are not strings written as strings, as `json.dumps` does; a
    number orjson does not take, an integer wider than 64 bits, through `json.dumps`)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False)


def _sqlite_pragmas(connection: Any, _record: Any) -> None:
    """WAL lets readers run while a turn is written; NORMAL sync is safe with WAL; foreign keys on."""
    cursor = connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def unavailable(exc: BaseException, what: str) -> DatabaseUnavailable | None:
    """`exc` as the error a caller gets when the database cannot be used (STORE_UNAVAILABLE, 503),
    logged with `what` failed; None when it is something else (a bug, a constraint), which stays
    what it is. Each entry that answers callers (REST, WebSocket, the guard chain) asks here."""
    if not (isinstance(exc, UNAVAILABLE) or (isinstance(exc, sa.DBAPIError) and exc.connection_invalidated)):
        return None
    failure = DatabaseUnavailable(cause_of(exc))
    logger.error("%s: %s", what, failure, exc_info=exc)  # the engine hides the statement's parameters
    return failure


def cause_of(exc: BaseException) -> str:
    """A database error in a few words: the driver's own message, without the SQL statement."""
    cause = getattr(exc, "orig", None) or exc
    text = str(cause).splitlines()[0] if str(cause) else ""
    return f"{type(cause).__name__}: {text[:160]}" if text else type(cause).__name__
