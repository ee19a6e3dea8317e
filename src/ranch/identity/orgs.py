"""Organizations (tenants): the default one holds the config file's agents and the bootstrap admin."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import Organization

DEFAULT_ORG = "default"
"""The operator's organization: config agents, the `admin` user, and A2A callers without a key."""


async def ensure_org(session: AsyncSession, org_id: str, name: str) -> Organization:
    org = await session.get(Organization, org_id)
    if org is None:
        org = Organization(id=org_id, name=name, allowed_agent_urls=[])
        session.add(org)
        await session.flush()
    return org
