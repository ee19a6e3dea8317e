"""The pruner takes turns across replicas: one round per period, on exactly one replica at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from _support.clock import Clock
from ranch.config import RetentionConfig
from ranch.db.engine import open_engine
from ranch.db.models import Organization, Room, RoomEvent
from ranch.retention.pruner import Round
from ranch.retention.rounds import Rounds
from ranch.retention.turns import Turns

pytestmark = pytest.mark.anyio

START = 1_800_000_000.0


@pytest.fixture
async def engines(database_url: str) -> AsyncIterator[tuple[AsyncEngine, AsyncEngine]]:
    """Two replicas' engines on one database."""
    first, second = open_engine(database_url), open_engine(database_url)
    yield first, second
    await first.dispose()
    await second.dispose()


async def test_a_turn_is_one_replicas_until_it_ends_then_anyones(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    clock = Clock(START)
    a = Turns(engines[0], "retention", "replica-a", clock=clock)
    b = Turns(engines[1], "retention", "replica-b", clock=clock)

    assert await a.take(60)
    assert not await b.take(60)
    clock.advance(59)
    assert not await b.take(60) and not await a.take(60)  # not even its holder takes the next one early
    assert await b.holder_now() == "replica-a"
    clock.advance(1)
    assert await b.take(60)  # the turn ended: the next is whoever asks first
    assert not await a.take(60)
    assert await a.holder_now() == "replica-b"


async def test_replicas_asking_at_once_get_one_turn_between_them(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    clock = Clock(START)

    async def ask(engine: AsyncEngine, name: str, won: list[str]) -> None:
        if await Turns(engine, "retention", name, clock=clock).take(60):
            won.append(name)

    for attempt in range(3):  # the first turn (an insert), then two taken over (updates)
        won: list[str] = []
        async with anyio.create_task_group() as group:
            group.start_soon(ask, engines[0], "replica-a", won)
            group.start_soon(ask, engines[1], "replica-b", won)
        assert len(won) == 1, f"attempt {attempt}: {won}"
        clock.advance(60)


async def test_two_replicas_rounds_prune_once_per_period_on_one_of_them(
    engines: tuple[AsyncEngine, AsyncEngine],
) -> None:
    clock = Clock(START)
    config = RetentionConfig(events="1d", push_outbox=None, every="10m")
    async with engines[0].begin() as connection:
        await connection.execute(insert(Organization), [{"id": "org", "name": "Org"}])
        await connection.execute(insert(Room), [{"id": "r", "org_id": "org"}])
    a = Rounds(engines[0], config, "replica-a", clock=clock)
    b = Rounds(engines[1], config, "replica-b", clock=clock)
    ran: list[tuple[str, Round]] = []

    async def round_on(name: str, rounds: Rounds) -> None:
        result = await rounds.once()
        if result is not None:
            ran.append((name, result))

    for period in range(3):
        async with engines[0].begin() as connection:  # two events a day old by the round's clock
            rows = [
                {
                    "room_id": "r",
                    "cursor": 2 * period + n + 1,
                    "type": "x",
                    "data": {},
                    "created_at": clock() - 86401,
                }
                for n in range(2)
            ]
            await connection.execute(insert(RoomEvent), rows)
        async with anyio.create_task_group() as group:
            group.start_soon(round_on, "replica-a", a)
            group.start_soon(round_on, "replica-b", b)
        assert [result.counts for _name, result in ran[period:]] == [{"events": 2}], f"period {period}"
        assert not await a.once() and not await b.once()  # the period's turn is taken
        clock.advance(600)
    async with engines[1].connect() as connection:
        assert (await connection.scalars(select(RoomEvent.seq))).all() == []
