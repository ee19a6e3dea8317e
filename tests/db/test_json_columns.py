"""JSON columns keep what callers wrote, whatever it holds: text in any script, integers wider than
64 bits (JSON allows them; the fast encoder does not take them, and they go through the standard
one), nested values. A room's message metadata and an event's data, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from ranch.db.engine import open_engine
from ranch.db.models import Organization, Room, RoomEvent

pytestmark = pytest.mark.anyio

VALUES: list[dict[str, Any]] = [
    {"text": "Grüße, 世界 🌍", "nested": {"list": [1, 2.5, None, True, "x"]}},
    {"wide": 2**70, "negative": -(2**80), "kept": "as it was"},
]


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = open_engine(database_url)
    async with engine.begin() as connection:
        await connection.execute(insert(Organization).values(id="acme", name="Acme"))
        await connection.execute(insert(Room).values(id="room", org_id="acme"))
    yield engine
    await engine.dispose()


@pytest.mark.parametrize("data", VALUES, ids=["scripts", "wide-integers"])
async def test_an_events_data_is_read_back_as_written(engine: AsyncEngine, data: dict[str, Any]) -> None:
    async with engine.begin() as connection:
        await connection.execute(insert(RoomEvent).values(room_id="room", cursor=1, type="note", data=data))
    async with engine.connect() as connection:
        stored = await connection.scalar(select(RoomEvent.data).where(RoomEvent.room_id == "room"))
    assert stored == data
