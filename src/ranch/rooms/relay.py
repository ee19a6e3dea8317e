"""Room events across replicas: the other replicas hear *that* a room has new events.

Each room's events are ordered by the room's own cursor, assigned under that room's lock in commit
order (rooms/bus.py), so the events table itself is each room's ordered stream. A replica that
commits events says so on the fan-out topic `rooms.events`, one message a commit (each room it wrote
and that room's newest cursor); every replica whose watchers follow one of those rooms then reads the
room's events after the last one it handed out, in order. Frames that are not stored (streamed text,
an external agent's delivery) travel on the topic itself.

Nothing here is only on the topic: a replica that may have missed messages reads every room it
follows again, and a WebSocket client that reconnects anywhere replays from its cursors.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import orjson
from anyio.abc import TaskStatus

from ranch.fanout import Fanout
from ranch.fanout.hearing import hear

logger = logging.getLogger(__name__)

TOPIC = "rooms.events"
OUTBOX = 4096
"""Messages waiting to be published; beyond it, one is dropped (stored events are read from the
table anyway: the others catch up when they next hear of the room, or after a gap)."""

Frame = dict[str, Any]


class Relay:
    """One replica's end of the room events shared with the other replicas (see the module)."""

    def __init__(
        self,
        fanout: Fanout,
        origin: str,
        *,
        events: Callable[[str | None, int], None],
        deliver: Callable[[Frame], None],
        to_agent: Callable[[str, Frame], int],
    ) -> None:
        self.fanout = fanout
        self.origin = origin
        self._events = events
        """Told of a room's new events (its newest cursor); None for every room (a gap)."""
        self._deliver = deliver
        self._to_agent = to_agent
        self._ignored = 0
        """Messages heard on the topic that are none of the kinds replicas send."""
        self._send, self._receive = anyio.create_memory_object_stream[bytes](OUTBOX)
        self.before_catch_up: Callable[[], Awaitable[None]] | None = None
        """Run before the events missed during a gap are handed out: the open connections' keys are
        checked first, so a key revoked during the gap gets none of them."""

    def committed(self, rooms: dict[str, int]) -> None:
        """One commit here wrote events in `rooms` (room -> its newest cursor): tell the other replicas,
        in one message (a batch of posts into many rooms is one publish, and one message to hear)."""
        self._announce({"kind": "events", "rooms": rooms})

    def live(self, payload: Frame) -> None:
        """A frame that is not stored: the other replicas' watchers get it too."""
        self._announce({"kind": "live", "payload": payload})

    def to_agent(self, agent_id: str, payload: Frame) -> None:
        """An external agent's frame: its connections on other replicas get it too."""
        self._announce({"kind": "agent", "agent": agent_id, "payload": payload})

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Hear the other replicas and publish what this one says, until cancelled."""
        async with self._send, self._receive, anyio.create_task_group() as group:
            await group.start(self._hear)
            group.start_soon(self._publish)
            task_status.started()

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
            rooms = message.get("rooms")
            if isinstance(rooms, dict):
                for room, cursor in rooms.items():
                    self._events(room, _cursor(cursor))
            else:  # a replica of an earlier release: one room, or (none named) every room
                room = message.get("room")
                self._events(room if isinstance(room, str) else None, _cursor(message.get("cursor")))
        elif message["kind"] == "live":
            self._deliver(message["payload"])
        else:
            self._to_agent(message["agent"], message["payload"])

    async def _caught_up(self) -> None:
        if self.before_catch_up is not None:
            await self.before_catch_up()
        self._events(None, 0)

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


def _cursor(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _frame_of(data: bytes) -> Frame | None:
    """A message of the topic as replicas send it (`events`, with the rooms a commit wrote and their
    newest cursors; from a replica of an earlier release, one room and its cursor, or none: every
    room; `live` with a frame that is not stored;
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
