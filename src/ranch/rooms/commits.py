"""Group commit for room writes: those queued while their room is busy go out in one transaction.

A post waits for its room's lock (rooms/locks.py) and then pays for a transaction of its own: a
connection, BEGIN, the room's row lock and count, COMMIT. Under load, the posts into one room queue
behind each other; `RoomCommits` runs them in one transaction of the room (one `Bus.transaction`):
each room has at most one transaction of writes going out, and once it holds the room it takes every
write queued by then (those that came while it waited for the room's lock too), each in the order
it came, so their events take the room's next cursors in that order and are handed out together
once committed. A write returns only once its transaction has committed: nothing is acknowledged
before it is stored, and no write waits for a batch to fill (that of a quiet room goes out at
once, alone). Where one lock orders every room's writes (SQLite has one writer), the queue is one
for all rooms (`Bus.batch_key`): posts into many rooms share a transaction as those into one do.

A write comes in two steps. `check` reads and refuses: its RanchError fails that write alone, so it
must write nothing before it raises. `apply` writes. If a batch fails anywhere else, it is rolled
back and its writes run again one by one, each in a transaction of its own, so one bad write fails
only its own caller (db/group_commit.py does the same for task saves). Each write runs in its
caller's context (its trace id and span), in a task of its own.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, TypeVar

from sqlalchemy import event
from sqlalchemy.orm import Session

from ranch.exceptions import RanchError
from ranch.rooms.bus import Bus, Tx

logger = logging.getLogger(__name__)

C = TypeVar("C")
T = TypeVar("T")

MAX_BATCH = 64
"""Most writes one transaction takes; the rest go in the next."""


@dataclass(eq=False)
class _Write(Generic[C, T]):
    room_id: str
    check: Callable[[Tx], Awaitable[C]]
    apply: Callable[[Tx, C], Awaitable[T]]
    future: asyncio.Future[T]
    context: contextvars.Context
    result: Any = None
    error: BaseException | None = None
    """A refusal by `check`, or a failure of what it left for after the commit (`Tx.after`, `Tx.later`)."""

    async def run(self, tx: Tx) -> T:
        return await self.apply(tx, await self.check(tx))

    async def try_in(self, tx: Tx) -> None:
        """`check`, then `apply`; a refusal is kept (nothing was written), anything else is raised."""
        try:
            checked = await self.check(tx)
        except RanchError as exc:
            self.error = exc
            return
        after, later = len(tx.after), len(tx.later)
        self.result = await self.apply(tx, checked)
        tx.after[after:] = [partial(self._after, callback) for callback in tx.after[after:]]
        tx.later[later:] = [partial(self._later, work) for work in tx.later[later:]]

    def _after(self, callback: Callable[[], object]) -> None:
        """A callback this write left for after the commit: its failure is this write's alone (the
        batch's other writes are stored, and their callbacks and work run)."""
        try:
            callback()
        except Exception as exc:
            self.error = self.error or exc

    async def _later(self, work: Callable[[], Awaitable[None]]) -> None:
        """Work this write left for after the commit: its failure is this write's alone."""
        try:
            await work()
        except Exception as exc:
            self.error = self.error or exc

    def settle(self) -> None:
        if self.future.done():
            return
        if self.error is not None:
            self.future.set_exception(self.error)
        else:
            self.future.set_result(self.result)


@dataclass(eq=False)
class _Room:
    pending: list[_Write[Any, Any]] = field(default_factory=list)
    flusher: asyncio.Task[None] | None = None


class RoomCommits:
    """Writes of each room, committed in shared transactions of that room, or of every room where
    one lock orders them all (see the module)."""

    def __init__(self, bus: Bus, *, max_batch: int = MAX_BATCH) -> None:
        self.bus = bus
        self.max_batch = max_batch
        self._rooms: dict[str, _Room] = {}
        """Queues (`Bus.batch_key`) with writes queued or going out; memory follows the rooms written."""

    async def write(
        self, room_id: str, check: Callable[[Tx], Awaitable[C]], apply: Callable[[Tx, C], Awaitable[T]]
    ) -> T:
        """`apply(tx, await check(tx))` in a transaction of `room_id`, with the room's other writes
        queued meanwhile; returns once committed, raises what the write raised. Cancelled before its
        batch goes out, it is not written."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        key = self.bus.batch_key(room_id)
        room = self._rooms.get(key)
        if room is None:
            room = self._rooms[key] = _Room()
        room.pending.append(_Write(room_id, check, apply, future, contextvars.copy_context()))
        if room.flusher is None:
            # a task of its own: a caller cancelled mid-batch never strands the others' writes
            room.flusher = asyncio.ensure_future(self._flush(key, room))
        return await future

    async def _flush(self, key: str, room: _Room) -> None:
        batch: list[_Write[Any, Any]] = []
        try:
            while room.pending:
                batch = []
                try:
                    await self._together(key, room, batch)
                except Exception:
                    await self._one_by_one(batch)
                for write in batch:
                    write.settle()
        except BaseException:  # the loop is shutting down: no caller waits forever
            for write in batch + room.pending:
                write.future.cancel()
            room.pending.clear()
            raise
        finally:
            room.flusher = None
            if not room.pending:
                del self._rooms[key]

    def _take(self, room: _Room, batch: list[_Write[Any, Any]]) -> None:
        """The next batch, in the order the writes came; those whose caller is gone are dropped."""
        while room.pending and len(batch) < self.max_batch:
            write = room.pending.pop(0)
            if not write.future.done():
                batch.append(write)

    async def _together(self, key: str, room: _Room, batch: list[_Write[Any, Any]]) -> None:
        """One transaction for the writes queued when it has the room (those that came while it
        waited for the room's lock go in too), put in `batch`. Raises only when nothing of it was
        committed."""
        committed = False

        def mark(_session: Session) -> None:
            nonlocal committed
            committed = True

        try:
            async with self.bus.transaction(key) as tx:
                event.listen(tx.session.sync_session, "after_commit", mark)
                self._take(room, batch)
                for write in batch:
                    await asyncio.create_task(write.try_in(tx), context=write.context)
        except Exception:
            if not committed:
                raise
            logger.exception("room %s: the work after a committed batch failed", key)

    async def _one_by_one(self, batch: list[_Write[Any, Any]]) -> None:
        for write in batch:
            write.result, write.error = None, None
            if write.future.done():
                continue  # its caller is gone, and the batch it was in was rolled back
            try:
                write.result = await asyncio.create_task(self._alone(write), context=write.context)
            except Exception as exc:
                write.error = exc

    async def _alone(self, write: _Write[Any, T]) -> T:
        async with self.bus.transaction(write.room_id) as tx:
            return await write.run(tx)
