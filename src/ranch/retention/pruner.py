"""`Pruner`: every lifetime that is on, applied once, in small transactions.

Each batch (`batch` rows, 500 by default) is one short transaction: a SQLite writer or a PostgreSQL
row lock is held for one batch, never for a whole prune, so requests keep being served between
them. A round may stop at a deadline (the background rounds have one); what it left is past its
lifetime still and goes in the next round. `dry_run` counts what a prune would delete, and deletes
nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from ranch.config import RetentionConfig
from ranch.retention.kinds import Part, parts
from ranch.retention.policy import lifetimes

Progress = Callable[[str, int], None]
"""Told after each batch: the part's label and how many of its rows are deleted so far."""


@dataclass
class Round:
    """What one prune did."""

    counts: dict[str, int] = field(default_factory=dict)
    """Rows deleted (or, dry, that would be) per part, for each lifetime that is on."""
    seconds: float = 0.0
    finished: bool = True
    """False when the deadline came first: rows past their lifetime remain."""
    dry_run: bool = False

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> str:
        """`tasks 120, events 0` (or `nothing is on`)."""
        return ", ".join(f"{label} {count}" for label, count in self.counts.items()) or "no lifetime is on"


class Pruner:
    """Deletes what `config`'s lifetimes say is past its time (`clock`: seconds since the epoch)."""

    def __init__(
        self,
        engine: AsyncEngine,
        config: RetentionConfig,
        *,
        clock: Callable[[], float] = time.time,
        forget_tasks: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        self.engine = engine
        self.config = config
        self.clock = clock
        on = lifetimes(config)
        self.parts = [(part, on[part.lifetime]) for part in parts(forget_tasks) if part.lifetime in on]

    async def run(
        self, *, dry_run: bool = False, budget: float | None = None, progress: Progress | None = None
    ) -> Round:
        """Prune (or count) every part once; stop between batches once `budget` seconds have passed."""
        started = time.monotonic()
        deadline = None if budget is None else started + budget
        now = self.clock()
        result = Round(dry_run=dry_run)
        for part, lifetime in self.parts:
            cutoff = now - lifetime
            if dry_run:
                result.counts[part.label] = await self._count(part, cutoff)
                continue
            result.counts[part.label], done = await self._prune(part, cutoff, deadline, progress)
            if not done:
                result.finished = False
                break
        result.seconds = time.monotonic() - started
        return result

    async def _count(self, part: Part, cutoff: float) -> int:
        async with self.engine.connect() as connection:
            return int((await connection.execute(part.count(cutoff))).scalar_one())

    async def _prune(
        self, part: Part, cutoff: float, deadline: float | None, progress: Progress | None
    ) -> tuple[int, bool]:
        """(rows deleted, whether none past the lifetime is left) for one part."""
        deleted = 0
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                return deleted, False
            async with self.engine.begin() as connection:  # one batch, one short transaction
                found, gone = await part.batch(connection, cutoff, self.config.batch)
            deleted += gone
            if progress is not None and gone:
                progress(part.label, deleted)
            if found < self.config.batch or not gone:
                return deleted, True
