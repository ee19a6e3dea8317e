"""Group commit for room writes: those queued meanwhile go out together, each room's in order.

A post pays for a transaction: a connection, BEGIN, its room's row lock and count, COMMIT. Under
load, `RoomCommits` runs the writes queued by then in one transaction (`Bus.batch`), those of many
rooms together: each room's writes in the order they came, so their events take the room's next
cursors in that order and are handed out together once committed. A room is in at most one batch
going out at a time; a room another writer holds (a long write, another replica's batch) is left
out of a batch rather than waited for, and its writes go out on their own once it is free, so a busy
room never holds up the others'. A room's writes left out are asked for again by the next batch
(another replica's batch holds a room for a moment), up to `SKIPS` times, then wait for their room
in a transaction of their own. One batch goes out at a time while it keeps up: where rooms are written
in parallel (PostgreSQL), another starts (up to `Bus.lanes`) when more are queued than the batches
going out take next, or when a write has waited `WAITED` for them; where one lock orders every room
(SQLite has one writer), one does, and it takes every write queued by the time it has the lock. A
write returns only once its transaction has committed: nothing is acknowledged before it is stored,
and no write waits for a batch to fill (that of a quiet room goes out at once, alone).

A write comes in two steps. `check` reads and refuses: its RanchError fails that write alone, so it
must write nothing before it raises. `apply` writes. If a batch fails anywhere else, it is rolled
back and its writes run again one by one, each in a transaction of its own room, so one bad write
fails only its own caller (db/group_commit.py does the same for task saves). Each write runs in its
caller's context (its trace id and span), in a task of its own.

The batches run in the task group they are given (the app's), not in the caller's task: a caller
cancelled mid-batch never strands the others' writes, and the group's end stops them (their callers
are cancelled, never left waiting).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Hashable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar

import anyio
from anyio.abc import TaskGroup
from sqlalchemy import event
from sqlalchemy.orm import Session

from ranch.exceptions import RanchError
from ranch.rooms.bus import Bus, Tx

logger = logging.getLogger(__name__)

C = TypeVar("C")
T = TypeVar("T")

MAX_BATCH = 64
"""Most writes one transaction takes; the rest go in the next."""
WAITED = 0.02
"""Seconds a queued write waits for the batches going out before another one opens for it (up to
`Bus.lanes`): fewer, larger batches cost less, but a slow batch holds up no write for long."""
SKIPS = 5
"""Batches that may leave a write out (its room held by another writer) before it waits for its room:
replicas writing the same rooms take turns at them, batch by batch, rather than wait."""


@dataclass(frozen=True)
class Ahead:
    """A read that writes of one kind (`key`) share, made once for a batch's writes of that kind
    before they run: `read` gets each write's `subject` with its room, once each pair (people's
    posts into rooms: their seats, in one query)."""

    key: Hashable
    read: Callable[[Tx, list[tuple[Any, str]]], Awaitable[None]]
    subject: Hashable = None
    """Whose write it is (the person posting)."""


@dataclass(eq=False)
class _Write(Generic[C, T]):
    room_id: str
    check: Callable[[Tx], Awaitable[C]]
    apply: Callable[[Tx, C], Awaitable[T]]
    future: asyncio.Future[T]
    context: contextvars.Context
    ahead: Ahead | None = None
    taken: bool = False
    """In a batch (or waiting for its room alone)."""
    skipped: int = 0
    """Batches that left it out, its room held by another writer."""
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


class RoomCommits:
    """Room writes, committed in shared transactions (see the module)."""

    def __init__(
        self, bus: Bus, group: TaskGroup, *, max_batch: int = MAX_BATCH, lanes: int | None = None
    ) -> None:
        self.bus = bus
        self.group = group
        """Where the batches run (they outlive the write that started them)."""
        self.max_batch = max_batch
        self.lanes = min(lanes or bus.lanes, bus.lanes)
        """Batches going out at once (never more than the bus allows)."""
        self._pending: list[_Write[Any, Any]] = []
        """Writes not yet in a batch, in the order they came."""
        self._busy: set[str] = set()
        """Rooms whose writes are going out (in a batch, or waiting for their room alone)."""
        self._lanes = 0
        """Batches being taken and written."""
        self._timed: deque[tuple[float, _Write[Any, Any]]] = deque()
        """Writes queued while every lane was busy, with the time (`WAITED` later) at which another
        lane opens for each still waiting; in the order they came, so their times only grow."""
        self._timing = False
        """Whether the one task that watches `_timed` runs."""

    async def write(
        self,
        room_id: str,
        check: Callable[[Tx], Awaitable[C]],
        apply: Callable[[Tx, C], Awaitable[T]],
        *,
        ahead: Ahead | None = None,
    ) -> T:
        """`apply(tx, await check(tx))` in a transaction of `room_id`, with other writes queued
        meanwhile (`ahead`: what it reads with writes of its kind, once a batch); returns once
        committed, raises what the write raised. Cancelled before its batch goes out, it is not
        written."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        write = _Write(room_id, check, apply, future, contextvars.copy_context(), ahead)
        self._pending.append(write)
        if not self._open_lane() and self._lanes < self.lanes:
            self._timed.append((loop.time() + WAITED, write))
            if not self._timing:
                self._timing = True
                self._spawn(self._waited)
        return await future

    def _open_lane(self, *, more: bool = False) -> bool:
        """Start a batch of the queued writes if none is going out, if they are more than the next
        batches take, or (`more`) if one has waited too long; True if it did."""
        if not self._pending or self._lanes >= self.lanes:
            return False
        if self._lanes and not more and len(self._pending) < self.max_batch * self._lanes:
            return False  # the batches going out take them next: fewer, larger transactions
        self._lanes += 1
        self._spawn(self._lane)
        return True

    async def _waited(self) -> None:
        """One task for every timed write, not one each (a post's hot path): at the time of the
        oldest write still waiting, another lane opens for it. Writes a batch took meanwhile are
        passed over without a wake each (under load, one wake a `WAITED`, not one a post)."""
        try:
            while True:
                while self._timed and (self._timed[0][1].taken or self._timed[0][1].future.done()):
                    self._timed.popleft()
                if not self._timed:
                    return
                due, write = self._timed[0]
                await anyio.sleep_until(due)
                if self._timed and self._timed[0][1] is write:
                    self._timed.popleft()
                    if not write.taken and not write.future.done():
                        self._open_lane(more=True)
        finally:
            self._timing = False

    def _spawn(self, work: Callable[[], Awaitable[None]]) -> None:
        """`work` in the group; a bug in it is logged, not let out to cancel the app's other tasks."""

        async def guarded() -> None:
            try:
                await work()
            except Exception:
                logger.exception("a batch of room writes failed outside any write")

        self.group.start_soon(guarded)

    async def _lane(self) -> None:
        """Batches, one after another, while there are writes to take."""
        batch: list[_Write[Any, Any]] = []
        try:
            while self._pending:
                batch = []
                try:
                    left = await self._together(batch)
                except Exception:
                    left = {}
                    await self._one_by_one(batch)
                taken = {write.room_id for write in batch}
                again: list[_Write[Any, Any]] = []
                for room, writes in left.items():  # held by another writer
                    taken.discard(room)
                    if max(write.skipped for write in writes) < SKIPS:  # the next batch asks again
                        for write in writes:
                            write.skipped += 1
                            write.taken = False
                        again += writes
                        self._busy.discard(room)
                    else:  # held for long: they wait for it alone
                        self._spawn(partial(self._alone_in, room, writes))
                self._pending[:0] = again  # first: each room's writes keep their order
                self._busy.difference_update(taken)
                for write in batch:
                    if write.room_id in taken:
                        write.settle()
                if not batch:
                    break  # what is queued waits for rooms other batches hold; they take it next
                self._open_lane()  # more queued meanwhile than this lane's next batch takes
        except BaseException:  # the group is cancelled (the app stops): no caller waits forever
            for write in batch + self._pending:
                write.future.cancel()
            self._pending.clear()
            raise
        finally:
            self._lanes -= 1

    def _take(self, batch: list[_Write[Any, Any]]) -> None:
        """The next batch, in the order the writes came, of rooms no other batch has: a room's writes
        after one left out stay too (they keep its order). Those whose caller is gone are dropped."""
        kept: list[_Write[Any, Any]] = []
        closed: set[str] = set()
        for index, write in enumerate(self._pending):
            if len(batch) >= self.max_batch:
                kept += self._pending[index:]
                break
            if write.future.done():
                continue
            if write.room_id in self._busy or write.room_id in closed:
                closed.add(write.room_id)
                kept.append(write)
            else:
                write.taken = True
                batch.append(write)
        self._pending = kept
        self._busy.update(write.room_id for write in batch)

    async def _together(self, batch: list[_Write[Any, Any]]) -> dict[str, list[_Write[Any, Any]]]:
        """One transaction for the next batch (put in `batch`); the writes of rooms it left out because
        another writer holds them, by room. Raises only when nothing of it was committed."""
        if not self.bus.parallel:  # one lock for every room: take what is queued once it is ours
            async with self._committing(self.bus.batch(())) as tx:
                self._take(batch)
                await self._run(tx, batch)
            return {}
        self._take(batch)
        if not batch:
            return {}
        left: dict[str, list[_Write[Any, Any]]] = {}
        async with self._committing(self.bus.batch(list(dict.fromkeys(w.room_id for w in batch)))) as tx:
            assert tx.rooms is not None
            for write in batch:
                if write.room_id not in tx.rooms:
                    left.setdefault(write.room_id, []).append(write)
            await self._run(tx, [write for write in batch if write.room_id in tx.rooms])
        return left

    async def _alone_in(self, room: str, writes: list[_Write[Any, Any]]) -> None:
        """Writes of one room another writer held: one transaction of it, once it is free."""
        try:
            try:
                async with self._committing(self.bus.transaction(room)) as tx:
                    await self._run(tx, writes)
            except Exception:
                await self._one_by_one(writes)
        except BaseException:  # the group is cancelled
            for write in writes:
                write.future.cancel()
            raise
        finally:
            self._busy.discard(room)
        for write in writes:
            write.settle()
        self._open_lane()  # its room's later writes, queued meanwhile

    @asynccontextmanager
    async def _committing(self, transaction: AbstractAsyncContextManager[Tx]) -> AsyncIterator[Tx]:
        """`transaction`, where a failure after its commit (in the work it left for after) is logged,
        not raised: its writes are stored, and each such failure is its own write's."""
        committed = False

        def mark(_session: Session) -> None:
            nonlocal committed
            committed = True

        try:
            async with transaction as tx:
                event.listen(tx.session.sync_session, "after_commit", mark)
                yield tx
        except Exception:
            if not committed:
                raise
            logger.exception("the work after a committed batch of room writes failed")

    @staticmethod
    async def _run(tx: Tx, writes: list[_Write[Any, Any]]) -> None:
        shared: dict[Hashable, tuple[Ahead, dict[tuple[Any, str], None]]] = {}
        for write in writes:
            if write.ahead is not None:
                asked = shared.setdefault(write.ahead.key, (write.ahead, {}))[1]
                asked[write.ahead.subject, write.room_id] = None
        for ahead, asked in shared.values():
            if len(asked) > 1:
                await ahead.read(tx, list(asked))
        for write in writes:
            await asyncio.create_task(write.try_in(tx), context=write.context)

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
