"""The loop guard: members passing a turn around with nothing new (docs/routing.md, "Loops").

Three signals, the cheapest first: one edge (agent -> next recipient) with the same text
`loop_repeats` times; a cycle of two or three edges that went round `loop_cycles` times and
starts again, whatever the texts; `loop_repeats` hops in a row that reached no member not reached
before and said nothing not said before. What was reached and said is shared with member teams
in the request data (`seen`), so a tree of teams judges progress as one turn.
"""

from __future__ import annotations

from dataclasses import dataclass
from hashlib import blake2b
from typing import Any

from ranch.wire.client_routing import Seen

CYCLES = (2, 3)
"""Lengths of the edge cycles the guard recognises."""
SEEN_LIMIT = 64
"""Members and text digests remembered (and sent to member teams); the oldest go first."""

Edge = tuple[str, str]


@dataclass(frozen=True)
class Loop:
    """What the guard saw: `said` for the note or the error, `reason` for the trail."""

    edge: str
    count: int
    said: str
    reason: str


def digest(text: str) -> str:
    """A short, stable digest of a reply's text (the same in every process, unlike `hash`)."""
    return blake2b(text.encode(), digest_size=8).hexdigest()


class LoopGuard:
    """One turn's memory of its route: edges since the last loop, and what the tree reached."""

    def __init__(self, repeats: int, cycles: int, seen: Seen | None = None, trail: list[str] | None = None):
        self.repeats = repeats
        self.cycles = cycles
        self.given: tuple[list[str], list[str]] = (
            [*(seen.members if seen else ()), *(trail or ())],
            list(seen.texts) if seen else [],
        )
        """What the caller's tree had reached before this turn (kept across a reset)."""
        self.members: dict[str, None] = {}
        self.texts: dict[str, None] = {}
        self.same: dict[tuple[str, str, str], int] = {}
        self.edges: list[Edge] = []
        self.stale = 0
        self.reset()

    def reset(self) -> None:
        """Start afresh after a loop was dealt with (the turn goes on from the default agent)."""
        self.members = dict.fromkeys(self.given[0])
        self.texts = dict.fromkeys(self.given[1])
        self.same.clear()
        self.edges.clear()
        self.stale = 0

    def check(self, agent: str, recipient: str, text: str, trail: list[dict[str, Any]] | None) -> Loop | None:
        """Record a hop of `agent`, which said `text` and passes to `recipient` (a member); the loop
        it closes, if any."""
        key = digest(text)
        new = _add(self.members, agent) | _add(self.texts, key)
        for inner in _agents(trail):  # a member team's own members count as reached too
            _add(self.members, inner)
        edge = f"{agent} -> {recipient}"
        same = self.same[(agent, recipient, key)] = self.same.get((agent, recipient, key), 0) + 1
        if same >= self.repeats:
            return Loop(edge, same, f"{edge} came {same} times with the same text", f"loop: {edge} x{same}")
        self.edges.append((agent, recipient))
        del self.edges[: -(self.cycles + 1) * max(CYCLES)]
        for length in CYCLES:
            if self.round_again(length):
                ring = " -> ".join([agent] + [a for a, _ in self.edges[-length:-1]] + [agent])
                said = f"{ring} went round {self.cycles} times and started again"
                return Loop(edge, self.cycles, said, f"loop: {ring} x{self.cycles}")
        self.stale = 0 if new else self.stale + 1
        if self.stale >= self.repeats:
            said = f"{self.stale} hops in a row reached no new member and said nothing new"
            return Loop(edge, self.stale, said, f"loop: no progress x{self.stale}")
        return None

    def round_again(self, length: int) -> bool:
        """The last edges went round one cycle of `length` edges `cycles` times, and the newest edge
        starts it again."""
        edges, span = self.edges, self.cycles * length + 1
        if len(edges) < span:
            return False
        n = len(edges)
        return all(edges[i] == edges[i - length] for i in range(n - span + length, n))

    def shared(self) -> tuple[list[str], list[str]]:
        """What a member team receives as `seen`: the members reached and digests of texts said."""
        return list(self.members), list(self.texts)


def _add(ordered: dict[str, None], item: str) -> bool:
    """Add `item` (bounded, oldest first out); True when it was not there."""
    if item in ordered:
        return False
    if len(ordered) >= SEEN_LIMIT:
        del ordered[next(iter(ordered))]
    ordered[item] = None
    return True


def _agents(trail: list[dict[str, Any]] | None) -> list[str]:
    """Every agent in a (JSON) trail, nested trails included."""
    found: list[str] = []
    for hop in trail or ():
        if isinstance(hop.get("agent"), str):
            found.append(hop["agent"])
        if isinstance(hop.get("trail"), list):
            found.extend(_agents([h for h in hop["trail"] if isinstance(h, dict)]))
    return found
