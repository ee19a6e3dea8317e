"""Storing tasks: retried a few times, then remembered, so GetTask right after a turn skips the database.

Nobody hears of a task's state before it is stored: a save that still fails after `SAVES` attempts
raises `StoreUnavailable`, which the engine gives the caller instead of an unstored state.
"""

from __future__ import annotations

import logging

import anyio
from a2a.types import Task

from ranch.agents.fold import state_name
from ranch.db.engine import cause_of
from ranch.exceptions import StoreUnavailable
from ranch.tasks.protos import copy
from ranch.tasks.run import RecentTasks
from ranch.tasks.store import SqlTaskStore, owner_context
from ranch.utils.backoff import Backoff

logger = logging.getLogger(__name__)

SAVES = Backoff(attempts=3, first=0.05, factor=4.0, jitter=False)
"""Tries to store a task (50 ms, then 200 ms apart) before the caller is told it failed."""


class Saver:
    """Stores tasks in `store` (retried) and keeps the latest in `recent`."""

    def __init__(self, store: SqlTaskStore, backoff: Backoff = SAVES) -> None:
        self.store = store
        self.backoff = backoff
        self.recent = RecentTasks()
        """Tasks stored lately, by id, with their owner: GetTask right after a turn skips the database."""

    async def save(self, owner: str, task: Task, runner: str | None = None) -> None:
        """Store `task` (retried), then remember it in `recent`; StoreUnavailable when it cannot be.
        `runner` names the process running it (None: none is, it is at rest)."""
        self.recent.pop(task.id)
        attempts = self.backoff.attempts
        for attempt in range(attempts):
            try:
                await self.store.save(task, owner_context(owner, runner))
                break
            except Exception as exc:  # a busy or failing database: retried, then told to the caller
                if attempt + 1 == attempts:
                    logger.error(
                        "could not store task %s after %d attempts", task.id, attempts, exc_info=True
                    )
                    raise StoreUnavailable(task.id, state_name(task.status.state), cause_of(exc)) from exc
                logger.warning("storing task %s failed; retrying", task.id, exc_info=True)
                await anyio.sleep(self.backoff.wait(attempt))
        self.recent.put(owner, copy(task))

    async def stored(self, task_id: str, owner: str) -> Task | None:
        """The task as last stored (a copy), when `owner` owns it."""
        cached = self.recent.get(task_id)
        if cached is not None and cached[0] == owner:
            return copy(cached[1])
        return await self.store.get(task_id, owner_context(owner))
