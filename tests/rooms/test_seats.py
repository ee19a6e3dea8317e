"""A person's seats in many rooms, read in one query for a batch of their posts (rooms/access.py
`seats`), answer exactly as one room's read does: the rooms they take part in are theirs to post
in, and a room they are not in, another organization's or an absent one is refused by `seat` as
before, naming the room. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from sqlalchemy import event, insert
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from ranch.db.engine import open_engine
from ranch.db.models import Organization, Participant, Room
from ranch.exceptions import NotFound
from ranch.identity.principal import Principal
from ranch.rooms.access import seat, seats

pytestmark = pytest.mark.anyio

MIA = Principal(kind="user", id="mia", org_id="acme")
ADMIN = Principal(kind="user", id="boss", org_id="acme", role="admin")
MINE = ("kitchen", "garden")
NOT_MINE = "cellar"
ELSEWHERE = "their-room"


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = open_engine(database_url)
    async with engine.begin() as connection:
        orgs = [{"id": "acme", "name": "Acme"}, {"id": "else", "name": "Else"}]
        await connection.execute(insert(Organization), orgs)
        rooms = [{"id": room, "org_id": "acme"} for room in (*MINE, NOT_MINE)]
        await connection.execute(insert(Room), [*rooms, {"id": ELSEWHERE, "org_id": "else"}])
        joined = [{"room_id": room, "kind": "user", "ref": "mia"} for room in (*MINE, ELSEWHERE)]
        await connection.execute(insert(Participant), joined)
    yield engine
    await engine.dispose()


async def test_seats_read_at_once_answer_as_each_rooms_own_read_and_refuse_what_it_refuses(
    engine: AsyncEngine,
) -> None:
    asked = [*MINE, NOT_MINE, ELSEWHERE, "absent"]
    async with async_sessionmaker(engine)() as alone:
        expected = {room: (await seat(alone, MIA, room)).room.id for room in MINE}
    statements: list[str] = []

    def count(_conn: Any, _cursor: Any, text: str, *_args: Any) -> None:
        statements.append(text)

    async with async_sessionmaker(engine)() as session:
        event.listen(engine.sync_engine, "before_cursor_execute", count)
        try:
            await seats(session, MIA, asked)
            found = {room: (await seat(session, MIA, room)).room.id for room in MINE}
            assert len(statements) == 1  # one query for every room; the seats come from it
            for room in (NOT_MINE, ELSEWHERE, "absent"):
                with pytest.raises(NotFound) as refused:
                    await seat(session, MIA, room)
                assert refused.value.field == "room_id" and room in str(refused.value)
        finally:
            event.remove(engine.sync_engine, "before_cursor_execute", count)
    assert found == expected


async def test_an_admin_is_seated_in_every_room_of_the_organization_and_no_other(engine: AsyncEngine) -> None:
    async with async_sessionmaker(engine)() as session:
        await seats(session, ADMIN, [*MINE, NOT_MINE, ELSEWHERE])
        assert [(await seat(session, ADMIN, room)).sender_kind for room in (*MINE, NOT_MINE)] == ["user"] * 3
        with pytest.raises(NotFound):
            await seat(session, ADMIN, ELSEWHERE)
