"""Rooms and who takes part in them: create, read, list, update (archive or close), join, leave.

A room's messages are rooms/messages.py's, its executions rooms/executing.py's; archiving or closing
a room completes its open executions through the latter.
"""

from __future__ import annotations

from functools import partial

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import (
    AgentKind,
    AgentRecord,
    Execution,
    ExecutionStatus,
    Participant,
    ParticipantKind,
    Role,
    Room,
    RoomStatus,
    User,
)
from ranch.exceptions import Conflict, InvalidInput, NotFound
from ranch.identity.orgs import DEFAULT_ORG, candidates, own_id
from ranch.identity.principal import SYSTEM, Principal
from ranch.identity.visibility import named_agent
from ranch.ids import new_id
from ranch.rooms import executions, views
from ranch.rooms.access import visible_room
from ranch.rooms.bus import Bus, Tx
from ranch.rooms.executing import RoomExecutions
from ranch.rooms.executions import FINAL
from ranch.rooms.requests import AddParticipant, CreateRoom, UpdateRoom
from ranch.rooms.views import ParticipantView


class Rooms:
    """Rooms and their participants."""

    def __init__(self, bus: Bus, executions: RoomExecutions) -> None:
        self.bus = bus
        self.executions = executions
        """Ends a room's open executions when it is archived or closed."""
        self.known: dict[str, str] = {}
        """Room id -> its organization, for the A2A gateway's check of each contextId without a query."""

    async def load_known(self) -> None:
        """Learn every room in the database (at start, and when other replicas may have made some):
        rooms are never deleted, so what is known stays known."""
        async with self.bus.sessions() as session:
            rows = (await session.execute(select(Room.id, Room.org_id))).all()
        self.known.update((row.id, row.org_id) for row in rows)

    # -- rooms ---------------------------------------------------------------------------------

    async def create(self, principal: Principal, request: CreateRoom, org_id: str | None = None) -> Room:
        """A room of the caller's organization (`org_id`: ranch itself creating one for an organization)."""
        org = org_id if principal is SYSTEM and org_id is not None else principal.org_id
        room_id = own_id(org, request.id) if request.id else new_id()
        async with self.bus.transaction(room_id) as tx:
            if await tx.session.get(Room, room_id) is not None:
                raise Conflict(f"the room id '{room_id}' is taken", "id")
            room = Room(
                id=room_id,
                org_id=org or DEFAULT_ORG,
                type=request.type,
                status=RoomStatus.ACTIVE,
                title=request.title or "",
                created_by=principal.id,
            )
            tx.session.add(room)
            await tx.session.flush()
            tx.after.append(lambda: self.known.__setitem__(room.id, room.org_id))
            if principal is not SYSTEM:
                creator = ParticipantKind(principal.kind)
                await self._join(
                    tx, room, AddParticipant(kind=creator, id=principal.id, role=Role.OWNER), principal
                )
            for index, member in enumerate(request.participants or []):
                await self._join(tx, room, member, principal, field=f"participants[{index}].id")
            if request.default_agent is not None:
                room.default_agent = await self._default_agent(tx, room, request.default_agent)
            return room

    async def get(self, principal: Principal, room_id: str) -> Room:
        async with self.bus.sessions() as session:
            return await visible_room(session, principal, room_id)

    async def list_rooms(
        self, principal: Principal, limit: int, after: str | None
    ) -> tuple[list[Room], str | None]:
        async with self.bus.sessions() as session:
            query = select(Room).where(Room.org_id == principal.org_id)
            if not principal.is_admin:
                query = query.where(
                    Room.id.in_(
                        select(Participant.room_id).where(
                            Participant.kind.in_(principal.participant_kinds), Participant.ref == principal.id
                        )
                    )
                )
            if after:
                query = query.where(Room.id > after)
            rows = list((await session.scalars(query.order_by(Room.id).limit(limit + 1))).all())
        return rows[:limit], (rows[limit - 1].id if len(rows) > limit else None)

    async def update(self, principal: Principal, room_id: str, request: UpdateRoom) -> Room:
        async with self.bus.transaction(room_id) as tx:
            room = await visible_room(tx.session, principal, room_id)
            if request.given("title"):
                room.title = request.title
            if request.given("default_agent"):
                value = request.default_agent
                room.default_agent = None if value is None else await self._default_agent(tx, room, value)
            if request.given("status"):
                status = request.status
                room.status = status
                if status != RoomStatus.ACTIVE:
                    open_ = await tx.session.scalars(
                        select(Execution).where(Execution.room_id == room.id, Execution.status.not_in(FINAL))
                    )
                    why, done = f"the room was {status}", ExecutionStatus.COMPLETED
                    for row in open_.all():
                        await executions.move(tx, row, done, why)
                        tx.later.append(partial(self.executions.end_task, row, done, why))
            return room

    # -- participants --------------------------------------------------------------------------

    async def participants(self, principal: Principal, room_id: str) -> list[ParticipantView]:
        async with self.bus.sessions() as session:
            await visible_room(session, principal, room_id)
            rows = (
                await session.scalars(
                    select(Participant).where(Participant.room_id == room_id).order_by(Participant.joined_at)
                )
            ).all()
            return [ParticipantView.of(row, await _name(session, row)) for row in rows]

    async def add_participant(
        self, principal: Principal, room_id: str, request: AddParticipant
    ) -> ParticipantView:
        async with self.bus.transaction(room_id) as tx:
            room = await visible_room(tx.session, principal, room_id)
            row = await self._join(tx, room, request, principal, field="id")
            return ParticipantView.of(row, await _name(tx.session, row))

    async def remove_participant(self, principal: Principal, room_id: str, kind: str, ref: str) -> None:
        async with self.bus.transaction(room_id) as tx:
            room = await visible_room(tx.session, principal, room_id)
            row = await _participant(tx.session, room, kind, ref)
            if row is None:
                raise NotFound(f"'{ref}' is not a participant of room '{room_id}'", "id")
            data = views.participant(row, await _name(tx.session, row))
            await tx.session.delete(row)
            if room.default_agent == row.ref:
                room.default_agent = None
            await tx.emit(room.id, "participant.left", data)

    async def _join(
        self, tx: Tx, room: Room, member: AddParticipant, principal: Principal, field: str = "id"
    ) -> Participant:
        """Add `member` (a short name is the organization's own first, then as given)."""
        kind = member.kind
        if kind == ParticipantKind.USER:
            ref = await _user_of(tx.session, room.org_id, member.id, field)
        elif principal is SYSTEM:
            if await tx.session.get(AgentRecord, member.id) is None:
                raise NotFound(f"no agent or team '{member.id}'", field)
            ref = member.id
        else:
            record = await named_agent(tx.session, principal, member.id, field)
            kind = ParticipantKind.TEAM if record.kind == AgentKind.TEAM else ParticipantKind.AGENT
            ref = record.id
        existing = await tx.session.get(Participant, (room.id, kind, ref))
        if existing is not None:
            raise Conflict(f"'{ref}' is already in room '{room.id}'", field)
        row = Participant(room_id=room.id, kind=kind, ref=ref, role=member.role)
        tx.session.add(row)
        await tx.session.flush()
        await tx.emit(room.id, "participant.joined", views.participant(row, await _name(tx.session, row)))
        return row

    async def _default_agent(self, tx: Tx, room: Room, name: str) -> str:
        """The room's agent or team `name` stands for (its organization's own first)."""
        for agent_id in candidates(room.org_id, name):
            member = await tx.session.scalar(
                select(Participant.ref).where(
                    Participant.room_id == room.id,
                    Participant.kind.in_((ParticipantKind.AGENT, ParticipantKind.TEAM)),
                    Participant.ref == agent_id,
                )
            )
            if member is not None:
                return member
        raise InvalidInput(f"default_agent '{name}' is not an agent or team of this room", "default_agent")


async def _name(session: AsyncSession, row: Participant) -> str:
    if row.kind == "user":
        user = await session.get(User, row.ref)
        return user.name if user else row.ref
    agent = await session.get(AgentRecord, row.ref)
    return agent.name if agent else row.ref


async def _user_of(session: AsyncSession, org_id: str, name: str, field: str) -> str:
    """The id of the organization's user `name` stands for (its own `<org>.<name>` first)."""
    for user_id in candidates(org_id, name):
        user = await session.get(User, user_id)
        if user is not None and user.org_id == org_id:
            return user.id
    raise NotFound(f"no user '{name}'", field)


async def _participant(session: AsyncSession, room: Room, kind: str, ref: str) -> Participant | None:
    """The room's participant `ref` names (its organization's own `<org>.<ref>` first)."""
    if kind not in tuple(ParticipantKind):
        return None
    for candidate in candidates(room.org_id, ref):
        row = await session.get(Participant, (room.id, kind, candidate))
        if row is not None:
            return row
    return None
