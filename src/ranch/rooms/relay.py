"""Room events across replicas: every replica's watchers see every room's events, in cursor order.

Cursors grow in commit order across replicas (the bus serializes room writes in the database),
so the events table itself is the ordered stream. A replica that commits events tells the
others on the fan-out topic `rooms.events` only *that* there is something new; each replica
then reads the events after the last one it handed out and hands them to its watchers, in
order. Local and remote events take the same path, so a watcher never gets a later cursor
before an earlier one (it would drop the earlier one as already seen). Frames that are not
stored (streamed text, an external agent's delivery) travel on the topic itself.

Nothing here is only on the topic: a replica that may have missed messages reads the table
again, and a WebSocket client that reconnects anywhere replays from its cursor.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson
from anyio.abc import TaskStatus
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from ranch.db.models import RoomEvent
from ranch.fanout import Fanout
from ranch.fanout.hearing import hear
from ranch.rooms.pages import event_page

logger = logging.getLogger(__name__)

TOPIC = "rooms.events"
OUTBOX = 4096
"""Messages waiting to be published; beyond it, live-only frames are dropped (stored events are
read from the table anyway)."""
RETRY = 1.0
"""Seconds before reading again when the database failed."""

Frame = dict[str, Any]


class Relay:
    """One replica's end of the room events shared with the other replicas (see the module)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        fanout: Fanout,
        origin: str,
        *,
        frame: Callable[[RoomEvent], Frame],
        deliver: Callable[[Frame], None],
        to_agent: Callable[[str, Frame], int],
        watched: Callable[[], bool],
    ) -> None:
        self.sessions = sessions
        self.fanout = fanout
        self.origin = origin
        self._frame = frame
        self._deliver = deliver
        self._to_agent = to_agent
        self._watched = watched
        self._last = 0
        """The cursor of the last event handed out (or passed over while nobody watched)."""
        self._new = anyio.Event()
        self._ignored = 0
        """Messages heard on the topic that are none of the kinds replicas send."""
        self._send, self._receive = anyio.create_memory_object_stream[bytes](OUTBOX)
        self.before_catch_up: Callable[[], Awaitable[None]] | None = None
        """Run before the events missed during a gap are handed out: the open connections' keys are
        checked first, so a key revoked during the gap gets none of them."""

    @property
    def handed_out(self) -> int:
        """The cursor of the last event handed out: a watcher registered now gets every later one live."""
        return self._last

    def committed(self) -> None:
        """Events were committed here: read them, and tell the other replicas."""
        self._new.set()
        self._announce({"kind": "events"})

    def live(self, payload: Frame) -> None:
        """A frame that is not stored: the other replicas' watchers get it too."""
        self._announce({"kind": "live", "payload": payload})

    def to_agent(self, agent_id: str, payload: Frame) -> None:
        """An external agent's frame: its connections on other replicas get it too."""
        self._announce({"kind": "agent", "agent": agent_id, "payload": payload})

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hear the other replicas, publish what this one says, hand out new events; until cancelled."""
        async with self._send, self._receive, anyio.create_task_group() as group:
            await group.start(self._hear)
            async with self.sessions() as session:
                self._last = await session.scalar(select(func.coalesce(func.max(RoomEvent.seq), 0))) or 0
            group.start_soon(self._publish)
            task_status.started()
            while True:
                await self._new.wait()
                self._new = anyio.Event()
                try:
                    await self._hand_out()
                except Exception:  # the database is busy: the next event, or this retry, reads again
                    logger.warning("could not read new room events; retrying", exc_info=True)
                    await anyio.sleep(RETRY)
                    self._new.set()

    async def _hear(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        await hear(self.fanout, TOPIC, self._heard, on_gap=self._caught_up, task_status=task_status)

    async def _heard(self, data: bytes) -> None:
        message = _frame_of(data)
        if message is None:
            self._ignored += 1
            if self._ignored == 1 or self._ignored % 1000 == 0:
                logger.warning("ignored %d message(s) on %s that no replica sends", self._ignored, TOPIC)
            return
        if message.get("origin") == self.origin:
            return  # this replica's own: already handed out
        if message["kind"] == "events":
            self._new.set()
        elif message["kind"] == "live":
            self._deliver(message["payload"])
        else:
            self._to_agent(message["agent"], message["payload"])

    async def _caught_up(self) -> None:
        if self.before_catch_up is not None:
            await self.before_catch_up()
        self._new.set()

    async def _hand_out(self) -> None:
        """Every event after the last one handed out, in cursor order; with nobody watching here,
        only the newest cursor (a watcher that comes later replays from the table itself)."""
        if not self._watched():
            async with self.sessions() as session:
                newest = await session.scalar(select(func.coalesce(func.max(RoomEvent.seq), 0))) or 0
            if not self._watched():  # asked again after the read: a watcher from now on replays past it
                self._last = max(self._last, newest)
                return
        while True:  # a page at a time, bounded in rows and bytes (rooms/pages.py)
            async with self.sessions() as session:
                rows = await event_page(session, self._last)
            if not rows:
                return
            for row in rows:
                self._deliver(self._frame(row))
                self._last = row.seq

    def _announce(self, message: Frame) -> None:
        try:
            self._send.send_nowait(orjson.dumps({**message, "origin": self.origin}))
        except anyio.WouldBlock:
            logger.warning("room frames for other replicas are queued beyond %d; dropping one", OUTBOX)

    async def _publish(self) -> None:
        async for data in self._receive:
            try:
                await self.fanout.publish(TOPIC, data)
            except Exception:  # Redis restarting: the others catch up from the table when they hear again
                logger.warning("could not tell the other replicas about room events", exc_info=True)


LIVE_TYPES = frozenset({"message.delta"})
"""The frames that travel on the topic to watchers: those that are not stored (`Bus.live`)."""


def _frame_of(data: bytes) -> Frame | None:
    """A message of the topic as replicas send it (`events`; `live` with a frame that is not stored;
    `agent` with an agent's id and a frame), or None."""
    try:
        message = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict):
        return None
    kind, payload = message.get("kind"), message.get("payload")
    if kind == "events":
        return message
    if kind == "live" and isinstance(payload, dict) and payload.get("type") in LIVE_TYPES:
        return message if isinstance(payload.get("room_id"), str) and payload.get("cursor") is None else None
    if kind == "agent" and isinstance(payload, dict) and isinstance(message.get("agent"), str):
        return message
    return None
