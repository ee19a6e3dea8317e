"""Which rooms a principal may see (another tenant's rooms look absent)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import Participant, Room
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
