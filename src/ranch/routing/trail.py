"""The route a turn took: one record per hop, kept in the final task's metadata.

What a turn has used of its budgets is what its trail says (`Trail.used`, `Trail.spent`): no
counter is kept beside it, so a turn resumed from its trail (an approval) counts the same.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Hop:
    """One hop: `agent` answered a message from `sender` and passed to `recipient`."""

    agent: str
    sender: str
    recipient: str
    reason: str
    ms: float
    trail: list[dict[str, Any]] | None = None
    """The hops inside `agent` when it is a team (its own trail, nested as deep as teams nest)."""
    loop: bool = False
    """This hop repeated an edge with the same text: the team's `on_loop` chose where it went."""
    tokens: int | None = None
    """What the member's answer reported it cost (a member team: its whole turn)."""
    problem: str | None = None
    """What was wrong with the member's routing data (`recipient is 42, not a string (ignored)`):
    the part of it the Router could not use, named for the member's author."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "agent": self.agent,
            "sender": self.sender,
            "recipient": self.recipient,
            "reason": self.reason,
            "ms": self.ms,
        }
        if self.trail:
            data["trail"] = self.trail
        if self.loop:
            data["loop"] = True
        if self.tokens is not None:
            data["tokens"] = self.tokens
        if self.problem is not None:
            data["problem"] = self.problem
        return data

    @property
    def weight(self) -> int:
        """Hops it counts for against a budget: one, or every hop made inside it."""
        return counted(self.trail) if self.trail else 1


class Trail(list[Hop]):
    """The hops of a turn, in order."""

    def used(self) -> int:
        """Hops made so far; a member team's count as the hops made inside it."""
        return sum(hop.weight for hop in self)

    def spent(self) -> int:
        """Tokens the turn's hops reported."""
        return sum(hop.tokens or 0 for hop in self)

    def reported(self) -> bool:
        """Whether any hop reported what it cost."""
        return any(hop.tokens is not None for hop in self)

    def ledger(self) -> list[str]:
        """What each hop that cost something cost: `agent tokens`."""
        return [f"{hop.agent} {hop.tokens}" for hop in self if hop.tokens]

    def to_json(self) -> list[dict[str, Any]]:
        return [hop.to_json() for hop in self]


def counted(trail: list[dict[str, Any]]) -> int:
    """Hops a (JSON) trail made, nested trails counted by their own hops."""
    return sum(
        counted(hop["trail"]) if isinstance(hop.get("trail"), list) and hop["trail"] else 1 for hop in trail
    )


def describe(hops: list[Hop], current: str | None = None) -> list[str]:
    """Agent ids in visiting order, including the hop in flight."""
    return [hop.agent for hop in hops] + ([current] if current else [])
