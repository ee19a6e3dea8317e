"""What bounds a turn: its hop budget, its token budget, and the loop guard (docs/routing.md,
"Budgets" and "Loops").

The budgets are read from the trail (`Trail.used`, `Trail.spent`); a team called by another team's
Router keeps the outer budget: the hops its caller had left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ranch.agents.fold import HopOutcome
from ranch.exceptions import BudgetExceeded, HopLimitExceeded, RoutingError, RoutingLoop
from ranch.routing.loops import LoopGuard
from ranch.routing.steps import Next
from ranch.routing.trail import Trail, describe
from ranch.wire import client_routing


@dataclass
class Limits:
    """One turn's budgets and loop guard, for team `team`."""

    team: str
    budget: int
    """Hops this turn may make: the team's own, or fewer when its caller had fewer left (the hop
    that called it counts as the hops made inside it), so teams of teams keep the outer budget."""
    inherited: bool
    budget_tokens: int | None
    guard: LoopGuard
    """Edges, what was reached and said: the loop guard (shared with member teams as `seen`)."""
    on_loop: Literal["default", "user", "fail"]
    default_agent: str
    loops: int = 0

    @classmethod
    def of_turn(
        cls,
        team: str,
        max_hops: int,
        budget_tokens: int | None,
        loop: tuple[int, int, Literal["default", "user", "fail"]],
        default_agent: str,
        incoming: client_routing.RoutingRequest | None,
    ) -> Limits:
        """The limits of a turn of a team, under the routing data of its caller (`incoming`) if any."""
        remaining = incoming.hops_remaining if incoming is not None else None
        repeats, cycles, on_loop = loop
        seen, trail = (incoming.seen, incoming.trail) if incoming is not None else (None, None)
        return cls(
            team=team,
            budget=min(max_hops, remaining) if remaining is not None else max_hops,
            inherited=remaining is not None and remaining < max_hops,
            budget_tokens=budget_tokens,
            guard=LoopGuard(repeats, cycles, seen, trail),
            on_loop=on_loop,
            default_agent=default_agent,
        )

    def remaining(self, trail: Trail) -> int:
        return self.budget - trail.used()

    def check(self, trail: Trail, target: str) -> None:
        """No hop starts once the token budget is spent or the hops are used up."""
        limit = self.budget_tokens
        if limit is not None and trail.spent() >= limit:
            raise BudgetExceeded(self.team, trail.spent(), limit, trail.ledger())
        if trail.used() >= self.budget:
            raise HopLimitExceeded(self.team, self.budget, describe(trail, target), inherited=self.inherited)

    def guard_loop(self, target: str, step: Next, outcome: HopOutcome) -> tuple[Next, RoutingError | None]:
        """A loop (`LoopGuard`: a repeated text, a cycle going round again, hops with nothing new) goes
        where the team's `on_loop` says: to the default agent once with a note, to the user, or fails."""
        if step.recipient == client_routing.USER:
            return step, None
        loop = self.guard.check(target, step.recipient, outcome.text, outcome.trail)
        if loop is None:
            return step, None
        self.guard.reset()
        self.loops += 1
        if self.on_loop == "fail":
            error = RoutingLoop(self.team, loop.edge, loop.count, loop.said)
            return Next(step.recipient, loop.reason, loop=True), error
        said = f"[ranch] {loop.said}"
        if self.on_loop == "default" and self.loops == 1 and target != self.default_agent:
            note = f"{said}; the turn went to '{self.default_agent}'."
            return Next(self.default_agent, loop.reason, note, fallback=True, loop=True), None
        return Next(client_routing.USER, loop.reason, f"{said}; the turn ended.", loop=True), None
