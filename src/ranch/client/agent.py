"""`ExternalAgent`: an agent with no A2A server of its own, answering in rooms through the hub.

Give it a function of one `Delivery` (the message addressed to the agent, and the room history
its `history_length` allows) that returns its answer (text, A2A parts, or None for no answer) or
yields it in pieces (streamed into the room as `message.delta`s, posted whole at the end). The
library does the rest:

- deliveries come over the WebSocket (the unanswered ones again on every connect, so a delivery
  a crashed process held is redelivered when it starts again);
- an answer is posted with `reply_to` = the delivery, which acknowledges it in the same
  transaction: a delivery is answered at most once, whatever crashes when;
- one delivery of a room at a time, in order; up to `concurrency` rooms at once;
- `stop()` (or SIGINT / SIGTERM with `run()`) takes no new delivery, lets those in hand finish
  within `grace_s`, and leaves the rest unacknowledged for the next start;
- an answer the hub does not take (it is away, the answer is too large) is posted again, or
  replaced by a note saying why; an agent that left the room acknowledges what it cannot answer.
"""

from __future__ import annotations

import contextlib
import logging
import signal
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Union, cast

import anyio
from anyio.abc import TaskGroup

from ranch.client import errors, models
from ranch.client.events import EventStream
from ranch.client.hub import Hub
from ranch.utils.backoff import Backoff

logger = logging.getLogger(__name__)

SEND_ATTEMPTS = 4
SEND_RETRIES = Backoff(attempts=SEND_ATTEMPTS, first=1.0, longest=10.0, jitter=False)
"""Tries to post an answer while the hub does not answer (1, 2, 4 s apart), before the delivery is
left for the next connection."""
DEFAULT_HISTORY_LENGTH = 20
"""Messages of room history a delivery holds when the agent's registration names none."""

Answer = Union[str, Sequence[dict[str, Any]], None]  # noqa: UP007 - a runtime alias
"""Text, A2A parts (JSON form), or None: no answer (the delivery is acknowledged)."""
Handler = Callable[["Delivery"], Union[Awaitable[Answer], AsyncIterator[str]]]  # noqa: UP007


@dataclass(frozen=True)
class Delivery:
    """A room message addressed to the agent."""

    id: str
    room_id: str
    message: models.MessageView
    history: list[models.MessageView]
    """The room's messages before it, oldest first, as many as the agent's `history_length`."""
    hub: Hub
    """The client the agent runs on: to read more, post elsewhere, look agents up."""

    @property
    def text(self) -> str:
        return self.message.text


class ExternalAgent:
    """Runs `handler` on each delivery of the agent whose key it is given (env RANCH_API_KEY)."""

    def __init__(
        self,
        handler: Handler,
        *,
        url: str | None = None,
        key: str | None = None,
        concurrency: int = 8,
        history_length: int | None = None,
        grace_s: float = 30.0,
    ) -> None:
        self.handler = handler
        self.url, self.key = url, key
        self.concurrency = concurrency
        self.history_length = history_length
        self.grace_s = grace_s
        self.answered = 0
        """Deliveries answered (or acknowledged without an answer) since it started."""
        self._stopping = anyio.Event()
        self._drained = anyio.Event()
        """Set whenever the last delivery in hand is done (what a graceful stop waits for)."""
        self._lanes: dict[str, deque[models.DeliveryView]] = {}

    def run(self) -> None:
        """Serve until SIGINT or SIGTERM, then stop gracefully."""
        anyio.run(self._run_with_signals)

    def stop(self) -> None:
        self._stopping.set()

    async def serve(self) -> None:
        """Answer deliveries until `stop()`."""
        async with Hub(self.url, self.key) as hub:
            me = await hub.me()
            if me.kind != "agent":
                raise errors.PermissionDenied(
                    f"the key is {me.kind} '{me.id}'s; an external agent needs its own"
                )
            limit = self.history_length
            if limit is None:
                limit = (await hub.agent(me.id)).history_length
            limit = DEFAULT_HISTORY_LENGTH if limit is None else limit
            logger.info("external agent %s answering at %s", me.id, hub.url)
            stream = EventStream(hub, rooms=[])
            busy = anyio.Semaphore(self.concurrency)
            async with anyio.create_task_group() as workers:
                async with anyio.create_task_group() as reader:
                    reader.start_soon(self._read, stream, workers, hub, busy, limit)
                    await self._stopping.wait()
                    reader.cancel_scope.cancel()  # takes no new delivery
                for lane in self._lanes.values():
                    lane.clear()  # those not begun stay unacknowledged: the next start gets them
                self._drained = anyio.Event()
                if self._lanes:  # deliveries in hand: they get `grace_s` to finish
                    with anyio.move_on_after(self.grace_s) as waited:
                        await self._drained.wait()
                    if waited.cancelled_caught:
                        logger.warning(
                            "stopping with deliveries unanswered: they come back on the next start"
                        )
                        workers.cancel_scope.cancel()
            await stream.aclose()

    async def _run_with_signals(self) -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(self._on_signals, group)
            await self.serve()
            group.cancel_scope.cancel()

    async def _on_signals(self, group: TaskGroup) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for _ in signals:
                logger.info("stopping: finishing the deliveries in hand")
                self.stop()
                return

    async def _read(
        self, stream: EventStream, workers: TaskGroup, hub: Hub, busy: anyio.Semaphore, limit: int
    ) -> None:
        async for event in stream:
            if not isinstance(event, models.DeliveryView):
                continue
            lane = self._lanes.get(event.room_id)
            if lane is None:
                lane = self._lanes[event.room_id] = deque()
                workers.start_soon(self._lane, event.room_id, lane, stream, hub, busy, limit)
            lane.append(event)

    async def _lane(
        self,
        room_id: str,
        lane: deque[models.DeliveryView],
        stream: EventStream,
        hub: Hub,
        busy: anyio.Semaphore,
        limit: int,
    ) -> None:
        """One room's deliveries, one at a time, in order."""
        try:
            while lane:
                delivery = lane.popleft()
                async with busy:
                    await self._answer(delivery, stream, hub, limit)
        finally:
            self._lanes.pop(room_id, None)
            if not self._lanes:
                self._drained.set()

    async def _answer(self, view: models.DeliveryView, stream: EventStream, hub: Hub, limit: int) -> None:
        """Answer one delivery; nothing that goes wrong here stops the agent."""
        logger.info("delivery %s in room %s", view.delivery_id, view.room_id)
        try:
            history = await hub.history(view.room_id, before=view.message.cursor, limit=limit)
        except errors.NotFound:  # no longer in the room: nothing to answer there
            await self._drop(hub, view)
            return
        except errors.HubError:
            logger.warning("delivery %s: cannot read its room; it comes again", view.delivery_id)
            stream.forget(view.delivery_id)
            return
        delivery = Delivery(view.delivery_id, view.room_id, view.message, history, hub)
        try:
            answer = await self._run(delivery, stream)
        except Exception as exc:  # the agent's own code failed: say so in the room, once
            logger.exception("the handler failed on delivery %s", view.delivery_id)
            answer = f"I could not answer this ({type(exc).__name__})."
        for attempt in range(SEND_ATTEMPTS):
            try:
                await self._send(hub, view, answer)
            except errors.Unreachable:  # posting again is safe: a second answer is refused (409)
                await anyio.sleep(SEND_RETRIES.base(attempt))
                continue
            except errors.NotFound:
                await self._drop(hub, view)
                return
            except errors.HubError as exc:  # the answer was refused (too large, a bad part): say so
                logger.error("delivery %s: the hub refused the answer: %s", view.delivery_id, exc)
                answer = f"My answer was refused ({exc.code or exc.status})."
                continue
            self.answered += 1
            return
        logger.warning("delivery %s: not answered; it comes again on the next connection", view.delivery_id)
        stream.forget(view.delivery_id)

    @staticmethod
    async def _drop(hub: Hub, view: models.DeliveryView) -> None:
        """Acknowledge a delivery that cannot be answered (the agent left the room)."""
        logger.warning("delivery %s: the agent is not in room %s any more", view.delivery_id, view.room_id)
        with contextlib.suppress(errors.HubError):
            await hub.ack(view.delivery_id)

    @staticmethod
    async def _send(hub: Hub, view: models.DeliveryView, answer: Answer) -> None:
        """Post the answer, acknowledging the delivery with it (or alone, for no answer)."""
        try:
            if answer is None:
                await hub.ack(view.delivery_id)
            elif isinstance(answer, str):
                await hub.post(view.room_id, answer, reply_to=view.delivery_id)
            else:
                await hub.post(view.room_id, parts=list(answer), reply_to=view.delivery_id)
        except errors.Conflict as exc:
            if exc.field != "reply_to":
                raise
            logger.info("delivery %s was answered already", view.delivery_id)

    async def _run(self, delivery: Delivery, stream: EventStream) -> Answer:
        result: Any = self.handler(delivery)
        if not isinstance(result, AsyncIterator):
            result = await result  # an answer, or the pieces of one (a coroutine returning a generator)
            if not isinstance(result, AsyncIterator):
                return cast(Answer, result)
        pieces: list[str] = []
        async for piece in result:
            pieces.append(piece)
            try:
                await stream.send({"type": "delta", "room_id": delivery.room_id, "text": piece})
            except Exception:  # the live text is a courtesy: the whole answer is posted anyway
                logger.debug("a streamed piece was not sent", exc_info=True)
        return "".join(pieces) or None
