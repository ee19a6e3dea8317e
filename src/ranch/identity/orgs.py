"""Organizations (tenants), and the ids of what they name.

The default organization holds the config file's agents and the bootstrap admin. A room, user or
agent id an organization *chooses* is its own: organization `acme` naming a room `ops` gets the
room `acme.ops`, so two organizations may choose the same name and neither learns of the other's
(a 409 only ever concerns the caller's own organization). The default organization's ids have no
prefix; ids the server generates (UUIDs) have none either; a chosen name holds no dot.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from ranch.db.models import Organization
from ranch.exceptions import InvalidInput
from ranch.identity.caller import DEFAULT_ORGANIZATION
from ranch.policy.fields import MAX_ID_LENGTH

DEFAULT_ORG = DEFAULT_ORGANIZATION
"""The operator's organization: config agents, the `admin` user, and A2A callers without a key."""
SEPARATOR = "."
"""Between an organization's id and a name it chose; neither may hold one."""


async def ensure_org(session: AsyncSession, org_id: str, name: str) -> Organization:
    org = await session.get(Organization, org_id)
    if org is None:
        org = Organization(id=org_id, name=name, allowed_agent_urls=[])
        session.add(org)
        await session.flush()
    return org


def own_id(org_id: str, name: str, field: str = "id") -> str:
    """The id of what organization `org_id` names `name`: `<org>.<name>`, bare in the default one."""
    full = name if org_id in (DEFAULT_ORG, "") else f"{org_id}{SEPARATOR}{name}"
    if len(full) > MAX_ID_LENGTH:
        raise InvalidInput(
            f"{field} '{name}' is too long: with the organization's prefix it is {len(full)} characters; "
            f"ids hold at most {MAX_ID_LENGTH}",
            field,
        )
    return full


def candidates(org_id: str, name: str) -> tuple[str, ...]:
    """The ids `name`, given by organization `org_id`, may stand for, its own first: `<org>.<name>`,
    then `name` as given (a global agent, a full id, or an id from before ids were scoped)."""
    if org_id in (DEFAULT_ORG, "") or SEPARATOR in name:
        return (name,)
    return (f"{org_id}{SEPARATOR}{name}", name)
