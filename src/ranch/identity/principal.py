"""Who is calling: a person or an agent of one organization, as the API key's owner.

The same principal scopes every entry: REST and the WebSocket, the A2A bindings and
`/mcp` (it is the A2A call context's user, through `KeyHolder`), and sessions.
"""

from __future__ import annotations

from dataclasses import dataclass

from a2a.auth.user import User
from starlette.authentication import BaseUser

from ranch.db.models import Role
from ranch.exceptions import Forbidden
from ranch.identity.caller import Caller

PRINCIPAL_KEY = "ranch.principal"
"""Where the authenticated principal is kept in the ASGI scope (and in the A2A call state)."""


@dataclass(frozen=True)
class Principal:
    """The owner of an API key: a person or an agent of one organization."""

    kind: str
    """user | agent"""
    id: str
    org_id: str
    name: str = ""
    role: str = Role.MEMBER
    is_superuser: bool = False

    @property
    def is_admin(self) -> bool:
        return self.kind == "user" and self.role in (Role.OWNER, Role.ADMIN)

    @property
    def participant_kinds(self) -> tuple[str, ...]:
        return ("user",) if self.kind == "user" else ("agent", "team")

    def require_admin(self, what: str) -> None:
        if not self.is_admin:
            raise Forbidden(f"only an owner or admin of organization '{self.org_id}' may {what}")


SYSTEM = Principal(kind="system", id="ranch", org_id="", role="owner")
"""ranch itself (start-up, the demo room): sees every organization."""


class KeyHolder(BaseUser, User):
    """A principal as Starlette's user and the a2a-sdk's at once; its name is the tasks' owner.

    Made once per known key (the key cache keeps it), so a keyed request builds no user objects.
    """

    def __init__(self, principal: Principal) -> None:
        self.principal = principal
        # user and agent ids live in different tables: the prefix keeps an agent from owning a user's tasks
        self._name = principal.id if principal.kind == "user" else f"agent:{principal.id}"

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self._name

    @property
    def user_name(self) -> str:
        return self._name


def session_caller(principal: Principal | None) -> str:
    """The caller half of a session key: the same on A2A and the REST API."""
    return "anonymous" if principal is None else f"{principal.kind}:{principal.id}"


def caller_of(principal: Principal) -> Caller:
    """The principal as routing agents and a team's rules see it."""
    kind = "person" if principal.kind == "user" else "agent"
    return Caller(principal.id, principal.org_id, kind, principal.role if kind == "person" else None)
