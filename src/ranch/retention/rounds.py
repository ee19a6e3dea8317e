"""The hub's pruning rounds: every `retention.every` seconds, on one replica at a time.

Each replica asks for the round's turn (`Turns`, a lease of one period); the one that gets it
prunes for at most `round_budget` seconds and reports what it did: one log line (when it deleted
anything, or could not finish) and the `ranch_retention_*` metrics (docs/observability.md).
A failed round (a busy database) is logged; the next period tries again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import anyio
from prometheus_client import Counter, Histogram
from sqlalchemy.ext.asyncio import AsyncEngine

from ranch.config import RetentionConfig
from ranch.observe import metrics
from ranch.retention.policy import describe, lifetimes, round_budget
from ranch.retention.pruner import Pruner, Round
from ranch.retention.turns import Turns

logger = logging.getLogger(__name__)

LEASE = "retention"
"""The name of the rounds' turns in `leases`."""

PRUNED = Counter("ranch_retention_pruned", "Rows deleted by retention, by what they were", ["kind"])
ROUND_SECONDS = Histogram(
    "ranch_retention_round_seconds",
    "Pruning rounds this replica ran, start to end",
    buckets=(0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 30.0, 60.0),
)


def report(result: Round) -> None:
    """A round's log line and metrics."""
    if metrics.enabled():
        ROUND_SECONDS.observe(result.seconds)
        for kind, count in result.counts.items():
            if count:
                PRUNED.labels(kind).inc(count)
    if result.total or not result.finished:
        more = "" if result.finished else "; more is past its lifetime, pruned next round"
        logger.info("retention pruned %s in %.2f s%s", result.summary(), result.seconds, more)


class Rounds:
    """This replica's part in the rounds (run `loop` in the hub's task group)."""

    def __init__(
        self,
        engine: AsyncEngine,
        config: RetentionConfig,
        replica: str,
        *,
        clock: Callable[[], float] = time.time,
        forget_tasks: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        self.config = config
        self.turns = Turns(engine, LEASE, replica, clock=clock)
        self.pruner = Pruner(engine, config, clock=clock, forget_tasks=forget_tasks)

    @property
    def active(self) -> bool:
        """Whether any lifetime is on (off: no round runs, not even the lease's read)."""
        return bool(lifetimes(self.config))

    async def once(self) -> Round | None:
        """One round if this replica gets its turn (None when another replica has it)."""
        if not await self.turns.take(self.config.every):
            return None
        result = await self.pruner.run(budget=round_budget(self.config))
        report(result)
        return result

    async def loop(self) -> None:
        """A round at start, then one every period; this replica runs those whose turn it gets."""
        logger.info("retention: %s, a round every %g s", describe(self.config), self.config.every)
        while True:
            try:
                await self.once()
            except Exception:  # a busy database: the next period tries again
                logger.warning("retention: a pruning round failed", exc_info=True)
            await anyio.sleep(self.config.every)
