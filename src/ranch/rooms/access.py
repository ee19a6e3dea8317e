"""Who is calling, and what of the hub they may see (tenants never see each other)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import and_, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import AgentRecord, Participant, Room
from ranch.exceptions import Forbidden, NotFound


@dataclass(frozen=True)
class Principal:
    """The owner of an API key: a person or an agent of one organization."""

    kind: str
    """user | agent"""
    id: str
    org_id: str
    name: str = ""
    role: str = "member"
    is_superuser: bool = False

    @property
    def is_admin(self) -> bool:
        return self.kind == "user" and self.role in ("owner", "admin")

    @property
    def participant_kinds(self) -> tuple[str, ...]:
        return ("user",) if self.kind == "user" else ("agent", "team")

    def require_admin(self, what: str) -> None:
        if not self.is_admin:
            raise Forbidden(f"only an owner or admin of organization '{self.org_id}' may {what}")


SYSTEM = Principal(kind="system", id="ranch", org_id="", role="owner")


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


def usable_agents(principal: Principal):  # type: ignore[no-untyped-def]
    """SQL condition: the agents the caller's organization may use."""
    return or_(
        AgentRecord.visibility == "global",
        and_(AgentRecord.org_id == principal.org_id, AgentRecord.visibility == "org"),
        and_(
            AgentRecord.org_id == principal.org_id,
            AgentRecord.visibility == "personal",
            or_(AgentRecord.owner_user_id == principal.id, AgentRecord.owner_user_id.is_(None)),
        ),
    )


async def usable_agent(session: AsyncSession, principal: Principal, agent_id: str, field: str) -> AgentRecord:
    row = await session.scalar(
        select(AgentRecord).where(AgentRecord.id == agent_id, usable_agents(principal))
    )
    if row is None:
        raise NotFound(f"no agent or team '{agent_id}'", field)
    return row
