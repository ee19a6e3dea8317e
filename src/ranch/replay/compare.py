"""Two routes of one turn side by side: where they part, hop by hop, and what each cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ranch.routing.trail import counted
from ranch.wire import client_routing

SAME_HOP = ("agent", "sender", "recipient")
"""What makes two hops the same step of a route: who had the turn, from whom, and to whom it went."""


@dataclass
class Route:
    """A turn's route: its hops (trail records, each with `reply` text and, replayed, `source`)."""

    hops: list[dict[str, Any]]
    state: str
    error: str | None = None
    stopped: str | None = None
    """Why a replay ended before the turn did (an unchanged member with no recorded answer left)."""

    def stops(self) -> list[str]:
        """`user`, each agent in order, then where the last hop passed the turn."""
        last = [str(self.hops[-1]["recipient"])] if self.hops else []
        return [client_routing.USER, *(str(hop["agent"]) for hop in self.hops), *last]

    def line(self) -> str:
        return " -> ".join(self.stops())

    def tokens(self) -> int:
        return sum(int(hop.get("tokens") or 0) for hop in self.hops)

    def used(self) -> int:
        """Hops made, a member team's counted as the hops inside it (as `max_hops` counts them)."""
        return counted(self.hops)

    def reaches(self, member: str) -> bool:
        """Whether `member` had the turn at any depth (inside a member team too)."""
        return member in _agents(self.hops)

    def ends_at(self) -> str:
        """Where the last hop passed the turn (`user` for an answered turn)."""
        return str(self.hops[-1]["recipient"]) if self.hops else client_routing.USER

    def summary(self) -> str:
        cost = f", {self.tokens()} tokens" if any("tokens" in hop for hop in self.hops) else ""
        return f"{len(self.hops)} hop(s){cost}, {self.state}"

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "route": self.stops(),
            "hops": self.hops,
            "state": self.state,
            "tokens": self.tokens(),
        }
        if self.error is not None:
            data["error"] = self.error
        if self.stopped is not None:
            data["stopped"] = self.stopped
        return data


def same_step(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return all(old.get(key) == new.get(key) for key in SAME_HOP)


def diverged_at(old: Route, new: Route) -> int | None:
    """The first hop (1-based) where the routes differ (one has a hop the other has not, too); None
    when every hop is the same step."""
    for number, (before, after) in enumerate(zip(old.hops, new.hops, strict=False), 1):
        if not same_step(before, after):
            return number
    if len(old.hops) != len(new.hops):
        return min(len(old.hops), len(new.hops)) + 1
    return None


def divergence(old: Route, new: Route) -> str:
    """One line saying where and how the new route parts from the old, or that it does not."""
    number = diverged_at(old, new)
    if number is None:
        if old.state != new.state:
            return f"same route; the turn now ends {new.state} (was {old.state})"
        reworded = [
            n
            for n, (a, b) in enumerate(zip(old.hops, new.hops, strict=True), 1)
            if a["reason"] != b["reason"]
        ]
        if reworded:
            return f"same route; another reason at hop {', '.join(map(str, reworded))}"
        return "same route"
    if number > len(new.hops):
        why = new.stopped or f"the turn ended {new.state}"
        return f"diverged at hop {number}: the new route ends there ({why})"
    after = new.hops[number - 1]
    if number > len(old.hops):
        return f"diverged at hop {number}: {after['agent']} now has a hop the old route did not make"
    before = old.hops[number - 1]
    if before["agent"] != after["agent"] or before["sender"] != after["sender"]:
        return f"diverged at hop {number}: {after['agent']} has the turn (was {before['agent']})"
    passes = f"{after['agent']} now passes to {after['recipient']}"
    return f"diverged at hop {number}: {passes} (was {before['recipient']})"


def _agents(hops: list[dict[str, Any]]) -> set[str]:
    found: set[str] = set()
    for hop in hops:
        found.add(str(hop.get("agent")))
        if isinstance(hop.get("trail"), list):
            found |= _agents(hop["trail"])
    return found
