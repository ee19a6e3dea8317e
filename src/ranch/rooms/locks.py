"""This process's order of room writes: one lock per room, or one for all where the database has one
writer.

On PostgreSQL a room's writes are ordered by its row (rooms/bus.py locks it for the transaction);
the lock here only keeps this process's writers of one room from each holding a pooled connection
while they wait for that row, and keeps a room's commits and their hand-out in one order. Writes to
different rooms never wait for each other. SQLite has one writer at a time whatever is done here:
its writers queue on one lock rather than fail on a busy database file.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio


@dataclass(eq=False)
class _Held:
    lock: anyio.Lock
    users: int = 0


class RoomLocks:
    """Locks by room, freed when nobody holds or waits for them (memory follows the rooms in use)."""

    def __init__(self, *, per_room: bool) -> None:
        self.per_room = per_room
        self._one = anyio.Lock()
        self._rooms: dict[str, _Held] = {}

    @asynccontextmanager
    async def hold(self, room: str | None) -> AsyncIterator[None]:
        """The write lock of `room` (None: a write that names no room, which orders against none on a
        database with many writers)."""
        if not self.per_room:
            async with self._one:
                yield
            return
        if room is None:
            yield
            return
        held = self._rooms.get(room)
        if held is None:
            held = self._rooms[room] = _Held(anyio.Lock())
        held.users += 1
        try:
            async with held.lock:
                yield
        finally:
            held.users -= 1
            if not held.users:
                del self._rooms[room]

    @asynccontextmanager
    async def free_of(self, rooms: Sequence[str]) -> AsyncIterator[list[str]]:
        """The locks of those of `rooms` nobody holds or waits for now, taken without waiting (a
        batch of writes leaves a busy room out rather than wait for it); the rooms it holds."""
        assert self.per_room, "one lock for every room: `hold` it"
        taken: list[_Held] = []
        free: list[str] = []
        try:
            for room in rooms:
                held = self._rooms.get(room)
                if held is not None:  # held, or waited for: its writers come first
                    continue
                held = self._rooms[room] = _Held(anyio.Lock(), users=1)
                held.lock.acquire_nowait()
                taken.append(held)
                free.append(room)
            yield free
        finally:
            for room, held in zip(free, taken, strict=True):
                held.lock.release()
                held.users -= 1
                if not held.users:
                    del self._rooms[room]
