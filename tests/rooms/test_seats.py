"""A person's seats in many rooms, read in one query for a batch of their posts (rooms/access.py
`seats_of`), answer exactly as one room's read does: the rooms they take part in are theirs to post
in, and a room they are not in, another organization's or an absent one is refused by `seat` as
before, naming the room. On SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from sqlalchemy import event, insert
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from ranch.db.engine import open_engine
from ranch.db.models import Organization, Participant, Room
from ranch.exceptions import NotFound
from ranch.identity.principal import Principal
from ranch.rooms.access import seat, seats_of

pytestmark = pytest.mark.anyio

MIA = Principal(kind="user", id="mia", org_id="acme")
LEO = Principal(kind="user", id="leo", org_id="acme")
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
        joined += [{"room_id": room, "kind": "user", "ref": "leo"} for room in (MINE[0], NOT_MINE)]
        joined += [{"room_id": MINE[1], "kind": "agent", "ref": "leo"}]  # an agent of the same name
        await connection.execute(insert(Participant), joined)
    yield engine
    await engine.dispose()


@contextlib.contextmanager
def _statements(engine: AsyncEngine) -> Iterator[list[str]]:
    """The SQL statements sent while the block runs."""
    sent: list[str] = []

    def count(_conn: Any, _cursor: Any, text: str, *_args: Any) -> None:
        sent.append(text)

    event.listen(engine.sync_engine, "before_cursor_execute", count)
    try:
        yield sent
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", count)


async def test_seats_read_at_once_answer_as_each_rooms_own_read_and_refuse_what_it_refuses(
    engine: AsyncEngine,
) -> None:
    asked = [*MINE, NOT_MINE, ELSEWHERE, "absent"]
    async with async_sessionmaker(engine)() as alone:
        expected = {room: (await seat(alone, MIA, room)).room.id for room in MINE}
    async with async_sessionmaker(engine)() as session:
        with _statements(engine) as statements:
            await seats_of(session, [(MIA, room) for room in asked])
            found = {room: (await seat(session, MIA, room)).room.id for room in MINE}
            assert len(statements) == 1  # one query for every room; the seats come from it
            for room in (NOT_MINE, ELSEWHERE, "absent"):
                with pytest.raises(NotFound) as refused:
                    await seat(session, MIA, room)
                assert refused.value.field == "room_id" and room in str(refused.value)
    assert found == expected


async def test_an_admin_is_seated_in_every_room_of_the_organization_and_no_other(engine: AsyncEngine) -> None:
    async with async_sessionmaker(engine)() as session:
        await seats_of(session, [(ADMIN, room) for room in (*MINE, NOT_MINE, ELSEWHERE)])
        assert [(await seat(session, ADMIN, room)).sender_kind for room in (*MINE, NOT_MINE)] == ["user"] * 3
        with pytest.raises(NotFound):
            await seat(session, ADMIN, ELSEWHERE)


async def test_many_peoples_seats_read_at_once_answer_as_each_persons_own_read(engine: AsyncEngine) -> None:
    """A batch of posts by several people: one query for all of them, each seated only where they
    take part (Leo is in the kitchen and the cellar; an agent named leo in the garden seats no one)."""
    people = [MIA, LEO, ADMIN]
    rooms = [*MINE, NOT_MINE, ELSEWHERE, "absent"]

    async def alone(principal: Principal, room: str) -> str | None:
        async with async_sessionmaker(engine)() as session:
            try:
                return (await seat(session, principal, room)).room.id
            except NotFound:
                return None

    expected = {(p.id, room): await alone(p, room) for p in people for room in rooms}
    async with async_sessionmaker(engine)() as session:
        with _statements(engine) as statements:
            await seats_of(session, [(p, room) for p in people for room in rooms])
            assert len(statements) == 1
        found: dict[tuple[str, str], str | None] = {}
        for p in people:
            for room in rooms:
                try:
                    found[p.id, room] = (await seat(session, p, room)).room.id
                except NotFound:
                    found[p.id, room] = None
    assert found == expected
    assert {key for key, room in found.items() if room} == {
        *(("mia", room) for room in MINE),
        ("leo", MINE[0]),
        ("leo", NOT_MINE),
        *(("boss", room) for room in (*MINE, NOT_MINE)),
    }
