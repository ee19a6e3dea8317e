"""What one replica tells the others when it changes what they cache or serve.

A key revoked, an agent registered or removed, a room created: the change is committed to the
database first, then published on the fan-out (`--redis-url`), and every replica drops what it
cached about it (the key's principal, the agent's visibility), ends the WebSockets and event
streams still open with a revoked key, serves what the agents table now holds, and knows the new
room (the A2A gateway tells room ids from other contextIds without a query). So a key revoked on
one replica is refused by all at once, not when their 5 s caches expire, and an agent registered
or a room created on one is usable on all; an agent removed ends the event streams bound to it
(with AgentNotFound, as a new call is answered). A replica that may have missed messages (its
listener fell behind, Redis reset) forgets everything it caches, reloads the tables and asks the
database about every key and agent its open connections hold, ending those that no longer stand;
while its fan-out is disconnected it serves no key from its cache (each call asks the database),
and asks about the open connections' keys every DEAF_RECHECK seconds, so a key revoked on another
replica during a Redis outage is refused here at once, and this one's connections end within about
that time (a database out as well is logged once, as unavailable, and asked again until it answers).
In one process (no Redis) nothing is published: the change is applied where it was made.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial

import anyio
import orjson
from anyio.abc import TaskStatus

from ranch.db.engine import unavailable
from ranch.exceptions import AgentNotFound
from ranch.fanout import Fanout
from ranch.fanout.hearing import hear
from ranch.identity.security import Security

logger = logging.getLogger(__name__)

TOPIC = "catalog.changes"
DEAF_RECHECK = 1.0
"""Seconds between checks of the open connections' keys while the fan-out is disconnected."""


class Changes:
    """Publishes this replica's changes and applies the others' (`follow`, in the app's task group)."""

    def __init__(self, security: Security) -> None:
        self.security = security
        self._fanout: Fanout | None = None
        self._resync: Callable[[], Awaitable[None]] | None = None
        self._add_room: Callable[[str, str], None] | None = None

    async def key_revoked(self, key_id: str) -> None:
        """The key's row says revoked (committed): no replica serves it from its cache any more."""
        self._revoke(key_id)
        await self._tell({"key": key_id})

    def _revoke(self, key_id: str) -> None:
        """Neither the cache nor a connection left open (a WebSocket, an event stream) serves the key."""
        self.security.keys.forget(key_id)
        self.security.live.revoked(key_id)

    async def agent_changed(self, agent_id: str) -> None:
        """The agent's row was added or removed (committed) and this replica serves it so."""
        self.security.access.forget(agent_id)
        await self._end_unreachable(agent_id)
        await self._tell({"agent": agent_id})

    async def _end_unreachable(self, agent_id: str) -> None:
        """End the event streams on `agent_id` whose caller may not reach it any more (it was removed,
        or is no longer visible to them) with the error a new call would get."""
        security = self.security
        callers = {bound.principal for bound in security.live.bound_to(agent_id)}
        for principal in callers:
            if not await security.reachable(principal, agent_id):
                lost = AgentNotFound(agent_id, await security.reachable_ids(principal))
                security.live.lost(agent_id, principal, lost)

    async def room_created(self, room_id: str, org_id: str) -> None:
        """The room's row is committed (and known here): every replica knows it as a room."""
        await self._tell({"room": room_id, "org": org_id})

    async def _tell(self, change: dict[str, str]) -> None:
        if self._fanout is not None and self._fanout.shared:
            await self._fanout.publish(TOPIC, orjson.dumps(change))

    async def follow(
        self,
        fanout: Fanout,
        resync: Callable[[], Awaitable[None]],
        add_room: Callable[[str, str], None],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Apply what the other replicas publish, until cancelled; started once it listens.

        `resync` reloads the agents table and the rooms; `add_room(room_id, org_id)` learns one room.
        """
        self._fanout, self._resync, self._add_room = fanout, resync, add_room
        self.security.keys.hearing = lambda: fanout.connected  # deaf, no key is served from the cache
        async with anyio.create_task_group() as group:
            await group.start(partial(hear, fanout, TOPIC, self._apply, on_gap=self._catch_up))
            task_status.started()
            group.start_soon(self._recheck_while_deaf, fanout)

    async def _recheck_while_deaf(self, fanout: Fanout) -> None:
        """While the fan-out is disconnected, revocations made on other replicas are not heard: ask
        the database instead, every DEAF_RECHECK seconds, about the keys of the open connections.
        A round that fails is logged once, whatever the number of rounds it fails again (`_failed`),
        and the next round asks again: a database outage ends, and a bug must not end the hub."""
        failing: type[Exception] | None = None
        while True:
            await anyio.sleep(DEAF_RECHECK)
            if fanout.connected or not self.security.live.key_ids():
                continue
            try:
                await self.recheck_live()
            except Exception as exc:
                failing = _failed(exc, failing)
            else:
                if failing is not None:
                    logger.info("open connections' keys are re-checked again")
                failing = None

    async def _catch_up(self) -> None:
        """Whatever was missed: forget what is cached and start again from the database."""
        self.security.keys.forget_all()
        self.security.access.forget_all()
        await self._reload()
        await self.recheck_live()

    async def recheck_live(self) -> None:
        """The revocations and removals missed meanwhile end the connections still open on them."""
        live = self.security.live
        for key_id, reason in (await self.security.keys.ended(live.key_ids())).items():
            live.revoked(key_id, reason)
        for agent_id in live.agent_ids():
            await self._end_unreachable(agent_id)

    async def _apply(self, data: bytes) -> None:
        try:
            change = orjson.loads(data)
        except orjson.JSONDecodeError:
            logger.warning("a catalog change that is not JSON was ignored")
            return
        if not isinstance(change, dict):
            return
        if isinstance(key_id := change.get("key"), str):
            self._revoke(key_id)
        if isinstance(agent_id := change.get("agent"), str):
            self.security.access.forget(agent_id)
            await self._reload()
            await self._end_unreachable(agent_id)
        room_id, org_id = change.get("room"), change.get("org")
        if isinstance(room_id, str) and isinstance(org_id, str) and self._add_room is not None:
            self._add_room(room_id, org_id)

    async def _reload(self) -> None:
        if self._resync is None:
            return
        try:
            await self._resync()
        except Exception:  # the database is busy: the next change, or a restart, tries again
            logger.warning("could not serve the agents table as it is now", exc_info=True)


RECHECK = f"re-checking open connections' keys (asked again every {DEAF_RECHECK:g} s)"


def _failed(exc: Exception, before: type[Exception] | None) -> type[Exception]:
    """Log a failed re-check: a database that cannot be used as such (`unavailable`), anything else
    as the bug it is, with its traceback; a failure of the kind the round before failed with is
    the same outage (or bug) going on, and is not logged again. The kind of failure now."""
    if type(exc) is before:
        logger.debug("re-checking open connections' keys failed again", exc_info=exc)
        return before
    if unavailable(exc, RECHECK) is None:
        logger.error("could not re-check open connections' keys (a bug); trying again", exc_info=exc)
    return type(exc)
