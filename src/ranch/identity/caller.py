"""Who a turn is for, as routing sees it: light enough for `import ranch` (no database)."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ORGANIZATION = "default"
"""The organization of a server without tenants, and of the config file's agents and teams."""


@dataclass(frozen=True)
class Caller:
    """Who a turn is for: the authenticated principal that sent the message (docs/routing.md,
    "The caller"). Routing agents see it; a team's `access` and `approval` rules read it."""

    id: str
    organization: str
    kind: str = "person"
    """person | agent"""
    role: str | None = None
    """A person's role in the organization (owner, admin, member)."""
    room_role: str | None = None
    """In a room, the poster's role in that room (owner, admin, member): a team's approval reads it."""

    def to_json(self) -> dict[str, str]:
        data = {"id": self.id, "organization": self.organization, "kind": self.kind}
        if self.role:
            data["role"] = self.role
        return data
