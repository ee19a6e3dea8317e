"""Which rooms a principal may see (another tenant's rooms look absent)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, String, and_, bindparam, exists, select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import AgentRecord, Execution, ExecutionStatus, Participant, Room
from ranch.exceptions import Forbidden, NotFound
from ranch.identity.principal import SYSTEM, Principal


async def visible_room(session: AsyncSession, principal: Principal, room_id: str) -> Room:
    """The room if the caller may see it; NotFound otherwise (another tenant's room looks absent)."""
    room = await session.get(Room, room_id)
    if room is None or (principal is not SYSTEM and room.org_id != principal.org_id):
        raise NotFound(f"no room '{room_id}'", "room_id")
    if principal is SYSTEM or principal.is_admin:
        return room
    member = await session.scalar(
        select(Participant.ref).where(
            Participant.room_id == room_id,
            Participant.kind.in_(principal.participant_kinds),
            Participant.ref == principal.id,
        )
    )
    if member is None:
        raise NotFound(f"no room '{room_id}'", "room_id")
    return room


async def require_room_admin(session: AsyncSession, principal: Principal, room_id: str) -> None:
    """An organization's owner or admin, or the room's own owner or admin; Forbidden otherwise."""
    if principal is SYSTEM or principal.is_admin:
        return
    role = await session.scalar(
        select(Participant.role).where(
            Participant.room_id == room_id,
            Participant.kind.in_(principal.participant_kinds),
            Participant.ref == principal.id,
        )
    )
    if role not in ("owner", "admin"):
        raise Forbidden(f"only an owner or admin of room '{room_id}' may do that")


@dataclass(frozen=True, slots=True)
class RoomFacts:
    """What a post reads of its room, as the seat query gives it: a plain record, not a `Room` (an ORM
    object cost about 14 µs to build, once a seat)."""

    id: str
    org_id: str
    status: str
    default_agent: str | None


@dataclass(frozen=True)
class Seat:
    """A room as its sender sees it when posting (`seat`)."""

    room: RoomFacts
    sender_kind: str
    """`user`, or the agent's kind as a sender: `agent` or `team`."""
    working: str | None = None
    """The id of the sender's execution that is working in the room (an external agent answering)."""


def _seat_query(kinds: tuple[str, ...]) -> Select[Any]:
    """The query of `seat` for senders taking part as `kinds`, built
    once (the rooms and sender are bound at each call: no statement is built per post)."""
    who = bindparam("who", type_=String)
    member = exists().where(
        Participant.room_id == Room.id, Participant.kind.in_(kinds), Participant.ref == who
    )
    columns: list[Any] = [Room.org_id, Room.status, Room.default_agent, member.label("member")]
    if "user" not in kinds:
        kind = select(AgentRecord.kind).where(AgentRecord.id == who).scalar_subquery()
        working = (
            select(Execution.id)
            .where(Execution.room_id == Room.id, Execution.agent_id == who)
            .where(Execution.status == ExecutionStatus.WORKING)
            .limit(1)
            .scalar_subquery()
        )
        columns += [kind.label("agent_kind"), working.label("working")]
    return select(*columns).where(Room.id == bindparam("room_id", type_=String))


_SEATS = "ranch.seats"
"""Where a session keeps the seats it read (`Session.info`)."""
_SEAT_QUERIES: dict[tuple[str, ...], Select[Any]] = {
    kinds: _seat_query(kinds) for kinds in (("user",), ("agent", "team"))
}
_PEOPLES_SEATS = (
    select(Room.id, Room.org_id, Room.status, Room.default_agent, Participant.ref)
    .outerjoin(
        Participant,
        and_(
            Participant.room_id == Room.id,
            Participant.kind == "user",
            Participant.ref.in_(bindparam("who", expanding=True)),
        ),
    )
    .where(Room.id.in_(bindparam("rooms", expanding=True)))
)
"""Rooms, each with a row for every one of the people asked who takes part in it as a person (one row,
`ref` null, when none does): `seats_of`'s one query."""


async def seat(session: AsyncSession, principal: Principal, room_id: str) -> Seat:
    """What a post needs of its room and sender, in one query: `visible_room`'s answer and refusal
    (NotFound), the sender's kind and, for an agent, its execution working in the room."""
    if principal.kind == "user":  # a person's seat stays as it is for the transaction (an agent's
        # working execution may move): posts of one person in one batch (rooms/commits.py) ask once
        kept: dict[tuple[str, str], Seat] = session.info.setdefault(_SEATS, {})
        if (room_id, principal.id) not in kept:
            kept[room_id, principal.id] = await _seat(session, principal, room_id)
        return kept[room_id, principal.id]
    return await _seat(session, principal, room_id)


async def seats_of(session: AsyncSession, asked: list[tuple[Principal, str]]) -> None:
    """Read people's seats, each in the rooms asked for them, in one query, for `seat` to answer from
    (a batch of posts by many people into many rooms, rooms/commits.py); a room one may not post in
    is left for `seat` to refuse. Agents' seats are read by `seat` alone."""
    kept: dict[tuple[str, str], Seat] = session.info.setdefault(_SEATS, {})
    wanted = list(
        dict.fromkeys(
            (principal, room)
            for principal, room in asked
            if principal.kind == "user" and (room, principal.id) not in kept
        )
    )
    if len(wanted) < 2:
        return
    await _flush(session)
    connection = await session.connection()
    rooms = list(dict.fromkeys(room for _principal, room in wanted))
    people = list(dict.fromkeys(principal.id for principal, _room in wanted))
    found: dict[str, Any] = {}
    members: set[tuple[str, str]] = set()
    for read in await connection.execute(_PEOPLES_SEATS, {"rooms": rooms, "who": people}):
        found[read.id] = read
        if read.ref is not None:
            members.add((read.id, read.ref))
    for principal, room in wanted:
        row = found.get(room)
        if row is None:
            continue
        taken = _seated(
            principal,
            room,
            _Found(row.org_id, row.status, row.default_agent, (room, principal.id) in members),
        )
        if taken is not None:
            kept[room, principal.id] = taken


@dataclass(frozen=True)
class _Found:
    """A person's row of the seat query, as `seats_of` reads it for many people at once."""

    org_id: str
    status: str
    default_agent: str | None
    member: bool


async def _seat(session: AsyncSession, principal: Principal, room_id: str) -> Seat:
    await _flush(session)
    connection = await session.connection()  # a plain statement: no ORM machinery on the way
    params = {"room_id": room_id, "who": principal.id}
    found = (await connection.execute(_SEAT_QUERIES[principal.participant_kinds], params)).first()
    taken = _seated(principal, room_id, found)
    if taken is None:
        raise NotFound(f"no room '{room_id}'", "room_id")
    return taken


async def _flush(session: AsyncSession) -> None:
    if session.new or session.dirty or session.deleted:
        await session.flush()  # what this transaction changed (an execution moved) is read as it is now


def _seated(principal: Principal, room_id: str, found: Any) -> Seat | None:
    """The seat a row of the seat query gives `principal`; None when the room is not theirs to post in
    (absent, another organization's, or one they take no part in)."""
    if found is None or (principal is not SYSTEM and found.org_id != principal.org_id):
        return None
    if not (principal is SYSTEM or principal.is_admin or found.member):
        return None
    room = RoomFacts(room_id, found.org_id, found.status, found.default_agent)
    if principal.kind == "user":
        return Seat(room, "user")
    return Seat(room, "team" if found.agent_kind == "team" else "agent", found.working)
