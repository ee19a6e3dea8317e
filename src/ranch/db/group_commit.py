"""Group commit: writes that arrive while one is in flight go out together, in one transaction.

Every team turn saves its task at least twice, and each save through SQLAlchemy's async
engine costs a transaction of its own (on SQLite, two hops to aiosqlite's thread). With
many conversations at once, the saves queue behind each other; `GroupWriter` sends those
queued meanwhile as one `executemany` in one transaction (bench/README.md, Scale). A
caller's `write` returns only once its row is committed, so nothing is acknowledged
before it is stored. If a batch fails, its rows are retried one by one, so one bad row
fails only its own caller.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.sql import Executable

Row = Mapping[str, Any]


class GroupWriter:
    """Executes one statement for many rows, batching the rows that wait while a batch commits."""

    def __init__(self, engine: AsyncEngine, statement: Executable, *, max_batch: int = 256) -> None:
        self.engine = engine
        self.statement = statement
        self.max_batch = max_batch
        self._pending: list[tuple[Row, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def write(self, row: Row) -> None:
        """Store `row`; returns once it is committed, raises what storing it raised."""
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._pending.append((row, future))
        if self._flusher is None or self._flusher.done():
            # a task of its own: a caller cancelled mid-write never strands the others' rows
            self._flusher = asyncio.ensure_future(self._flush())
        await future

    async def _flush(self) -> None:
        batch: list[tuple[Row, asyncio.Future[None]]] = []
        try:
            while self._pending:
                batch = self._pending[: self.max_batch]
                del self._pending[: self.max_batch]
                try:
                    await self._execute([row for row, _ in batch])
                except Exception:
                    await self._one_by_one(batch)
                else:
                    for _, future in batch:
                        if not future.done():
                            future.set_result(None)
        except BaseException:  # the loop is shutting down: no caller waits forever
            for _, future in batch + self._pending:
                future.cancel()
            self._pending.clear()
            raise

    async def _one_by_one(self, batch: list[tuple[Row, asyncio.Future[None]]]) -> None:
        for row, future in batch:
            try:
                await self._execute([row])
            except Exception as exc:
                if not future.done():
                    future.set_exception(exc)
            else:
                if not future.done():
                    future.set_result(None)

    async def _execute(self, rows: list[Row]) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(self.statement, rows)
