"""This process among the hub's replicas: a heartbeat in the database, and who else is alive.

Work a replica holds (a task it runs, a room delivery, a webhook update) names the replica;
when a replica stops saying it is alive for longer than the lease, or stops cleanly, another
replica takes its work over. On one host, a replica whose process is gone is known gone at
once, so a server restarted on the same machine takes over its own leftovers immediately.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from ranch.db.models import Replica
from ranch.utils.groups import Lifespan, background

logger = logging.getLogger(__name__)

DEFAULT_LEASE = 10.0
"""Seconds a replica may stay silent before its work is taken over (`ranch serve --lease`)."""
FORGET_AFTER = 24 * 3600.0
"""Seconds after which a gone replica's row is removed."""


def _process_exists(pid: int) -> bool:
    """Whether a process of this host runs `pid` (a zombie, killed and not yet reaped by its
    parent, does not: it will never beat again)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc (not Linux), or it has just gone
        return False
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"  # the state follows the command name's ")"


class Replicas(Lifespan):
    """This replica's heartbeat, and what it knows of the others (an async context manager)."""

    def __init__(
        self, engine: AsyncEngine, *, lease: float = DEFAULT_LEASE, clock: Callable[[], float] = time.time
    ) -> None:
        if lease <= 0:
            raise ValueError(f"a lease is a positive number of seconds, not {lease}")
        self.engine = engine
        self.lease = lease
        self.clock = clock
        self.host = socket.gethostname()[:200]
        self.pid = os.getpid()
        self.id = f"{self.host[:40]}:{self.pid}:{secrets.token_hex(3)}"
        """How this process is named on the work it holds and in logs."""

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[Replicas]:
        """Alive while open: a heartbeat every third of the lease; gone at once when closed."""
        await self.beat()
        try:
            async with background() as group:
                group.start_soon(self._beating)
                yield self
        finally:
            with anyio.CancelScope(shield=True):  # a clean stop: the others take over at once
                async with self.engine.begin() as connection:
                    await connection.execute(delete(Replica).where(Replica.id == self.id))

    async def beat(self) -> None:
        """Say this replica is alive (its row is made again if another replica removed it)."""
        now = self.clock()
        async with self.engine.begin() as connection:
            done = await connection.execute(
                update(Replica).where(Replica.id == self.id).values(heartbeat_at=now)
            )
            if done.rowcount == 0:
                await connection.execute(
                    Replica.__table__.insert().values(  # type: ignore[attr-defined]
                        id=self.id, host=self.host, pid=self.pid, started_at=now, heartbeat_at=now
                    )
                )

    async def _beating(self) -> None:
        while True:
            await anyio.sleep(self.lease / 3)
            try:
                await self.beat()
            except Exception:  # a busy database: the next beat may pass; the lease allows a few misses
                logger.warning("replica %s could not write its heartbeat", self.id, exc_info=True)

    async def alive(self) -> set[str]:
        """The replicas alive now: heard from within the lease, and (on this host) still running."""
        now = self.clock()
        async with self.engine.connect() as connection:
            rows = (
                await connection.execute(select(Replica.id, Replica.host, Replica.pid, Replica.heartbeat_at))
            ).all()
        alive = {self.id}
        gone: list[str] = []
        for row in rows:
            fresh = now - row.heartbeat_at <= self.lease
            running = row.host != self.host or _process_exists(row.pid)
            if fresh and running:
                alive.add(row.id)
            elif now - row.heartbeat_at > FORGET_AFTER:
                gone.append(row.id)
        if gone:
            async with self.engine.begin() as connection:
                await connection.execute(delete(Replica).where(Replica.id.in_(gone)))
        return alive
