"""Running a suite: each case through its team, its route checked, a pass/fail table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ranch.config import RanchConfig
from ranch.replay.changes import changed_members
from ranch.replay.compare import Route
from ranch.replay.player import Replayed, replay
from ranch.replay.suite import Case, Expect, Suite, case_name, case_turn
from ranch.wire.client import ClientPool


@dataclass
class CaseResult:
    name: str
    replayed: Replayed
    failures: list[str]

    @property
    def passed(self) -> bool:
        return not self.failures

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "failures": self.failures,
            "route": self.replayed.new.stops(),
            "hops": len(self.replayed.new.hops),
            "tokens": self.replayed.new.tokens(),
            "state": self.replayed.new.state,
        }


async def run_suite(suite: Suite, config: RanchConfig) -> list[CaseResult]:
    """Every case, in order, on one outbound pool."""
    results = []
    async with ClientPool() as pool:
        for index, case in enumerate(suite.cases):
            results.append(await run_case(suite, case, index, config, pool))
    return results


async def run_case(suite: Suite, case: Case, index: int, config: RanchConfig, pool: ClientPool) -> CaseResult:
    turn = case_turn(suite, case)
    if case.recorded is None:  # a plain input: every member called
        replayed = await replay(turn, config, mode="live", pool=pool)
        same = False
    else:
        changed = changed_members(config, turn.team, suite.baseline) if suite.mode == "recorded" else {}
        replayed = await replay(turn, config, mode=suite.mode, changed=changed, pool=pool)
        same = case.expect.same_route is not False
    return CaseResult(case_name(index, case), replayed, failures(case.expect, replayed, same_route=same))


def failures(expect: Expect, replayed: Replayed, *, same_route: bool) -> list[str]:
    """What the new route broke of `expect`, one phrase each; empty when it kept everything."""
    route: Route = replayed.new
    broken = [f"never reaches {member}" for member in expect.reaches if not route.reaches(member)]
    broken += [f"reaches {member}" for member in expect.never_reaches if route.reaches(member)]
    if expect.ends_at is not None and route.ends_at() != expect.ends_at:
        broken.append(f"ends at {route.ends_at()}, not {expect.ends_at}")
    last = str(route.hops[-1]["agent"]) if route.hops else None
    if expect.answered_by is not None and last != expect.answered_by:
        broken.append(f"last hop by {last}, not {expect.answered_by}")
    if expect.within is not None and route.used() > expect.within:
        broken.append(f"took {route.used()} hops (at most {expect.within})")
    if expect.max_tokens is not None and route.tokens() > expect.max_tokens:
        broken.append(f"cost {route.tokens()} tokens (at most {expect.max_tokens})")
    if expect.state is not None and route.state != expect.state:
        broken.append(f"ended {route.state}, not {expect.state}")
    if same_route and (replayed.diverged_at() is not None or replayed.old.state != route.state):
        broken.append(replayed.divergence())
    if route.stopped is not None and not same_route:
        broken.append(f"replay stopped: {route.stopped}")
    return broken


def table(results: list[CaseResult]) -> list[str]:
    """The pass/fail table `ranch eval` prints, and its last line: how many passed."""
    width = max([len(result.name) for result in results] + [4])
    lines = [f"{'case':<{width}}  result  route"]
    for result in results:
        mark = "pass" if result.passed else "FAIL"
        lines.append(f"{result.name:<{width}}  {mark:<6}  {result.replayed.new.line()}")
        lines += [f"{'':<{width}}          - {failure}" for failure in result.failures]
    failed = sum(not result.passed for result in results)
    lines.append(f"{len(results)} case(s): {len(results) - failed} passed, {failed} failed")
    return lines
