"""`EventStream`: rooms' events over the WebSocket, resumed after a dropped connection.

Each room counts its own events, so the stream keeps a cursor per room: the cursor of the last event
of that room it yielded. It subscribes with them (`{"rooms": {"demo": 41, "ops": 0}}`), so after a
reconnect the hub replays what each room missed; an event at or before its room's cursor is never
yielded again, nor is a delivery (an agent key's) already yielded on this stream. Live-only events
(`message.delta`) carry no cursor: those sent while the connection was down are gone, as
docs/api.md says.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from ranch.client import errors, models
from ranch.deprecation import deprecated
from ranch.utils.backoff import Backoff
from ranch.utils.lru import Lru

if TYPE_CHECKING:
    from ranch.client.hub import Hub

logger = logging.getLogger(__name__)

RETRIES = Backoff(first=0.2, longest=5.0, jitter=False)
"""How the client waits before trying the hub again: its WebSocket, and idempotent requests (hub.py)."""
QUIET = frozenset({"subscribed", "unsubscribed", "pong", "acked"})
"""Frames that answer the client's own frames: not events."""
SEEN_DELIVERIES = 10_000
"""Delivery ids remembered so none is yielded twice (the oldest are forgotten first)."""
UNAUTHENTICATED = 4401


class EventStream:
    """`async for event in hub.events({"demo": 41, "ops": 0})`: `EventView`s, and `DeliveryView`s
    for an agent's key. Reconnects with backoff until `aclose()`; a refused key raises
    `Unauthenticated`.

    `rooms` maps each room to the cursor of the last event of it already seen (0: none); a list of
    rooms starts each of them after `cursor`.
    """

    def __init__(self, hub: Hub, rooms: Mapping[str, int] | Sequence[str], cursor: int = 0) -> None:
        self.hub = hub
        if isinstance(rooms, str):  # one room, named alone
            rooms = [rooms]
        self.cursors: dict[str, int] = (
            dict(rooms) if isinstance(rooms, Mapping) else dict.fromkeys(rooms, cursor)
        )
        """Room id -> the cursor of the last event of that room yielded: where a reconnect resumes."""
        self.connected = anyio.Event()
        self._connection: ClientConnection | None = None
        self._closed = False
        self._subscribed = False
        self._seen: Lru[str, None] = Lru(SEEN_DELIVERIES)

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __aiter__(self) -> AsyncIterator[models.EventView | models.DeliveryView]:
        return self._events()

    @property
    def rooms(self) -> list[str]:
        """The rooms it follows."""
        return list(self.cursors)

    @property
    @deprecated(since="0.1.0", removal="0.2.0", use="EventStream.cursors (each room counts its own events)")
    def cursor(self) -> int:
        """The newest cursor yielded in any of its rooms: exact for one room."""
        return max(self.cursors.values(), default=0)

    async def send(self, frame: dict[str, Any]) -> None:
        """A frame on the current connection (an `ack`, a `delta`); waits for one to be open."""
        await self.connected.wait()
        assert self._connection is not None
        await self._connection.send(json.dumps(frame))

    def forget(self, delivery_id: str) -> None:
        """Yield this delivery again when the hub sends it again (it was not answered)."""
        self._seen.pop(delivery_id)

    async def aclose(self) -> None:
        self._closed = True
        if self._connection is not None:
            await self._connection.close()

    async def _events(self) -> AsyncIterator[models.EventView | models.DeliveryView]:
        url = self.hub.url.replace("http", "ws", 1) + "/api/v1/ws"
        headers = {"X-API-Key": self.hub.key} if self.hub.key else {}
        attempt = 0
        while not self._closed:
            try:
                # no per-message deflate: the hub sends every watcher of a room the same text, and
                # compressing it again per connection would cost the hub memory and a deflate a watcher
                async with connect(
                    url, additional_headers=headers, proxy=None, open_timeout=10, compression=None
                ) as connection:
                    self._connection = connection
                    self._subscribed = False
                    if self.cursors:
                        subscribe = {"type": "subscribe", "rooms": self.cursors}
                        await connection.send(json.dumps(subscribe))
                    self.connected.set()
                    attempt = 0
                    async for raw in connection:
                        event = self._event(json.loads(raw))
                        if event is not None:
                            yield event
            except InvalidStatus as exc:
                if exc.response.status_code in (401, 403):
                    raise errors.Unauthenticated(
                        "the hub refused the key", status=exc.response.status_code
                    ) from exc
                logger.warning("the hub's WebSocket answered HTTP %s; retrying", exc.response.status_code)
            except InvalidHandshake as exc:  # the connection dropped during the opening handshake
                logger.info("the hub's WebSocket handshake failed (%s); retrying", exc)
            except ConnectionClosed as exc:
                if exc.rcvd is not None and exc.rcvd.code == UNAUTHENTICATED:
                    raise errors.Unauthenticated("the hub refused the key", status=401) from exc
                if not self._closed:
                    logger.info("the WebSocket closed (%s); resuming after cursors %s", exc, self.cursors)
            except OSError as exc:
                logger.info("cannot reach the hub's WebSocket (%r); retrying", exc)
            finally:
                self._connection = None
                self.connected = anyio.Event()
            if not self._closed:
                await anyio.sleep(RETRIES.base(attempt))
                attempt += 1

    def _event(self, frame: dict[str, Any]) -> models.EventView | models.DeliveryView | None:
        """The frame as an event to yield; None for answers, and for what was yielded already."""
        kind = frame.get("type")
        if kind == "subscribed":
            self._subscribed = True
        if kind in QUIET:
            return None
        if kind == "error":
            error = errors.from_answer(0, frame)
            if self.cursors and not self._subscribed:  # the subscription itself was refused
                raise error
            logger.warning("the hub refused a frame: %s", error)
            return None
        if kind == "delivery":
            delivery = models.DeliveryView.model_validate(frame)
            if delivery.delivery_id in self._seen:
                return None
            self._seen.put(delivery.delivery_id, None)
            return delivery
        event = models.EventView.model_validate(frame)
        if event.cursor is not None:
            if event.cursor <= self.cursors.get(event.room_id, 0):
                return None
            self.cursors[event.room_id] = event.cursor
        return event
