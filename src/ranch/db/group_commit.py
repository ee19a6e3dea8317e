"""Group commit: writes that arrive while one is in flight go out together, in one transaction.

Every team turn saves its task at least twice, and each save through SQLAlchemy's async
engine costs a transaction of its own (on SQLite, two hops to aiosqlite's thread). With
many conversations at once, the saves queue behind each other; a `CommitGroup` sends those
queued meanwhile as one `executemany` per statement in one transaction (bench/README.md,
Scale). A caller's `write` returns only once its row is committed, so nothing is
acknowledged before it is stored. If a batch fails, its rows are retried one by one, so one
bad row fails only its own caller.

A row may also be *deferred*: queued without waiting, it goes out with the next write of
the group (the task's save that ends the same turn), or on its own after `linger` seconds.
A team's conversation is written that way: the task that answers its turn is stored in the
same transaction as the conversation, or after it, never before. `GroupWriter` is one
statement's view of a group.

A group is an async context manager: the hub's lifespan enters it, and while it is entered its
flushes and its linger run in its own task group (a writer cancelled mid-write never strands the
others' rows), and leaving it commits what is queued (within `CLOSE_WITHIN`). A group never
entered (a store made on its own, in a script or a test) flushes in the writer's task, shielded
from the writer's cancellation; its deferred rows go with the next write or `settle()`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import anyio
from anyio.abc import TaskGroup
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Executable

from ranch.observe import metrics

logger = logging.getLogger(__name__)

Row = Mapping[str, Any]
LINGER = 0.05
"""Seconds a deferred row waits for a write to go out with before it goes out alone."""
CLOSE_WITHIN = 5.0
"""Seconds a shutdown waits for the rows queued so far to be committed."""


@dataclass
class _Pending:
    statement: Executable
    row: Row
    future: asyncio.Future[None] | None
    """None for a deferred row: nobody waits on it."""

    def settle(self, error: BaseException | None = None) -> None:
        if self.future is None:
            if error is not None:
                logger.warning("a deferred write failed: %s", error)
        elif not self.future.done():
            if error is None:
                self.future.set_result(None)
            else:
                self.future.set_exception(error)


class CommitGroup:
    """Rows of any statements, committed in shared transactions (see the module)."""

    def __init__(self, engine: AsyncEngine, *, max_batch: int = 256, linger: float = LINGER) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self.linger = linger
        self._pending: list[_Pending] = []
        self._group: TaskGroup | None = None
        self._flushed: anyio.Event | None = None
        """Set when the flush in flight ends; None while none is."""
        self._lingering = False

    async def __aenter__(self) -> Self:
        group = anyio.create_task_group()
        await group.__aenter__()
        self._group = group
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def write(self, statement: Executable, row: Row) -> None:
        """Store `row` with `statement`; returns once it is committed, raises what storing it raised."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append(_Pending(statement, row, future))
        await self._start()
        await future

    def defer(self, statement: Executable, row: Row) -> None:
        """Queue `row`: it is committed with the next write, or within `linger` seconds (while the
        group is entered; else with the next write or `settle`)."""
        self._pending.append(_Pending(statement, row, None))
        if self._group is not None and not self._lingering and self._flushed is None:
            self._lingering = True
            self._group.start_soon(self._linger)

    async def settle(self) -> None:
        """Return once every row queued so far is committed (or has failed)."""
        while self._pending or self._flushed is not None:
            flushed = self._flushed
            if flushed is None:
                await self._start()
            else:
                await flushed.wait()

    async def aclose(self, within: float = CLOSE_WITHIN) -> None:
        """Let the rows queued so far be committed, for at most `within` seconds, then stop: the
        engine may be disposed after this (a flush left running would use it after it is gone)."""
        with anyio.move_on_after(within, shield=True) as waited:
            await self.settle()
        if waited.cancelled_caught:
            logger.warning("%d queued row(s) not committed at shutdown", len(self._pending))
        group, self._group = self._group, None
        if group is not None:
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)

    async def _linger(self) -> None:
        try:
            await anyio.sleep(self.linger)
        finally:
            self._lingering = False
        if self._flushed is None:
            await self._start()

    async def _start(self) -> None:
        """Flush what is pending unless a flush is in flight (it takes what comes meanwhile): in the
        group's task group when entered, else here, shielded."""
        if not self._pending or self._flushed is not None:
            return
        self._flushed = anyio.Event()
        if self._group is not None:
            self._group.start_soon(self._flush)
        else:
            with anyio.CancelScope(shield=True):
                await self._flush()

    async def _flush(self) -> None:
        batch: list[_Pending] = []
        try:
            while self._pending:
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
                metrics.commit_batch(len(batch))
                try:
                    await self._execute(batch)
                except Exception:
                    await self._one_by_one(batch)
                else:
                    for pending in batch:
                        pending.settle()
                batch = []
        except BaseException:  # the group is closing: no caller waits forever
            for pending in batch + self._pending:
                if pending.future is not None and not pending.future.done():
                    pending.future.cancel()
            self._pending.clear()
            raise
        finally:
            flushed, self._flushed = self._flushed, None
            if flushed is not None:
                flushed.set()

    async def _one_by_one(self, batch: list[_Pending]) -> None:
        for pending in batch:
            try:
                await self._execute([pending])
            except Exception as exc:
                pending.settle(exc)
            else:
                pending.settle()

    async def _execute(self, batch: list[_Pending]) -> None:
        """One transaction: each statement once, with its rows in the order they came."""
        rows: dict[int, tuple[Executable, list[Row]]] = {}
        for pending in batch:
            rows.setdefault(id(pending.statement), (pending.statement, []))[1].append(pending.row)
        async with self.engine.begin() as connection:
            for statement, its_rows in rows.values():
                await connection.execute(statement, its_rows)


class GroupWriter:
    """One statement's writes through a `CommitGroup` (its own unless one is shared)."""

    def __init__(
        self,
        engine: AsyncEngine,
        statement: Executable,
        *,
        max_batch: int = 256,
        group: CommitGroup | None = None,
    ) -> None:
        self.group = group or CommitGroup(engine, max_batch=max_batch)
        self.statement = statement

    async def write(self, row: Row) -> None:
        """Store `row`; returns once it is committed, raises what storing it raised."""
        await self.group.write(self.statement, row)

    def defer(self, row: Row) -> None:
        """Store `row` with the group's next write, or within its `linger` (nobody waits on it)."""
        self.group.defer(self.statement, row)
