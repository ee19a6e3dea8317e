"""PostgreSQL connections and a database that drops them (127.0.0.1:5432 through a TCP proxy the
test cuts, as a restart or a failover would): a connection that rested in the pool is pinged and
replaced before anyone uses it; one used a moment ago is trusted (a ping at every checkout costs
three round trips), so a drop the ping did not see fails one statement as "unavailable", and the
pool then replaces every connection it holds."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine

from _support.tcpproxy import TcpProxy
from ranch.db import engine as engines
from ranch.db.engine import open_engine, unavailable


def _through(proxy: TcpProxy, url: str) -> str:
    """`url` reached through `proxy` (the test database's host and port replaced)."""
    _scheme, _, rest = url.partition("@")
    return f"postgresql+asyncpg://postgres@127.0.0.1:{proxy.port}/{rest.split('/', 1)[1]}"


async def _one(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        return int((await connection.execute(text("SELECT 1"))).scalar_one())


def _connects(engine: AsyncEngine) -> list[int]:
    made: list[int] = []
    event.listen(engine.sync_engine, "connect", lambda *_args: made.append(1))
    return made


def test_a_connection_dropped_while_it_rested_is_replaced_before_use(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engines, "PING_AFTER_IDLE", 0.0)  # every connection back in the pool has rested

    async def scenario(proxy: TcpProxy) -> None:
        engine = open_engine(_through(proxy, postgres_url))
        made = _connects(engine)
        try:
            assert await _one(engine) == 1
            assert len(made) == 1
            proxy.cut()
            proxy.restore()
            assert await _one(engine) == 1  # the ping found it dead: a new connection answered
            assert len(made) == 2
            assert await _one(engine) == 1  # and that one is kept
            assert len(made) == 2
        finally:
            await engine.dispose()

    with TcpProxy(5432) as proxy:
        asyncio.run(scenario(proxy))


def test_a_connection_used_a_moment_ago_is_not_pinged_and_one_failure_replaces_the_pool(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engines, "PING_AFTER_IDLE", 3600.0)  # nothing rests that long in this test

    async def scenario(proxy: TcpProxy) -> None:
        engine = open_engine(_through(proxy, postgres_url))
        made = _connects(engine)
        try:
            async with engine.connect() as first, engine.connect() as second:  # two in the pool
                for connection in (first, second):
                    await connection.execute(text("SELECT 1"))
            assert len(made) == 2
            proxy.cut()
            proxy.restore()
            with pytest.raises(DBAPIError) as failed:  # not pinged: the drop shows on first use
                await _one(engine)
            assert failed.value.connection_invalidated
            assert unavailable(failed.value, "a test statement") is not None  # a 503 to callers
            assert await _one(engine) == 1  # the other pooled connection was replaced too
            assert len(made) == 3
        finally:
            await engine.dispose()

    with TcpProxy(5432) as proxy:
        asyncio.run(scenario(proxy))
