"""`Turns`: work the replicas share by taking turns, one replica at a time (a lease row).

A turn is a row of `leases`: who holds it and until when. A replica takes the next turn only once
the current one is over (`until` has passed), with one conditional UPDATE (or the INSERT of the
first turn): when several replicas ask at once, the database gives it to exactly one of them. A
replica that stops during its turn costs nothing but that turn: the next one is anyone's at `until`.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine

from ranch.db.models import Lease
from ranch.db.upsert import insert_for


class Turns:
    """The turns of the work called `name`, asked for by the replica `holder`."""

    def __init__(
        self, engine: AsyncEngine, name: str, holder: str, *, clock: Callable[[], float] = time.time
    ) -> None:
        self.engine = engine
        self.name = name
        self.holder = holder
        self.clock = clock

    async def take(self, length: float) -> bool:
        """Take the next turn, lasting `length` seconds from now, if the current one is over: True
        for the one replica that got it."""
        now = self.clock()
        taken = (
            update(Lease)
            .where(Lease.name == self.name, Lease.until <= now)
            .values(holder=self.holder, until=now + length)
        )
        first = (
            insert_for(self.engine.dialect.name)(Lease)
            .values(name=self.name, holder=self.holder, until=now + length)
            .on_conflict_do_nothing(index_elements=["name"])
        )
        async with self.engine.begin() as connection:
            if (await connection.execute(taken)).rowcount:
                return True
            return bool((await connection.execute(first)).rowcount)

    async def holder_now(self) -> str | None:
        """Whose turn it is now (None: nobody's)."""
        async with self.engine.connect() as connection:
            row = (await connection.execute(Lease.__table__.select().where(Lease.name == self.name))).first()
        return None if row is None or row.until <= self.clock() else str(row.holder)
