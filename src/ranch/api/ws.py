"""WebSocket /api/v1/ws: subscribe to rooms, replay each from its cursor, then live events.

One task writes the watcher's frames to the socket, a second reads the client's frames (subscribe,
unsubscribe, ack, ping); either ending ends both. An event goes out as the text the bus encoded
once for every watcher of its room (rooms/watchers.py); while the writer waits for work, the bus
writes the event's frame, built once, straight to the socket instead (api/wsframes.py). An agent
key also receives its unacknowledged deliveries on connect and new ones live. A connection never
just drops: a binary frame gets an error frame and a close with 1003, an unexpected failure an
error frame and a close with 1011, a client too slow for its events a close with 1013 (it resumes
from its cursors).

`subscribe` takes a cursor per room (`{"rooms": {"demo": 41}}`); the older form, a list of rooms
and one `cursor` for them all, still works until ranch 0.2.0 and is answered with a deprecation note.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, NoReturn, assert_never, cast

import anyio
import orjson
from pydantic import TypeAdapter
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.websockets import WebSocket, WebSocketDisconnect

from ranch.api import errors
from ranch.api.inbox import acknowledge, pending_pages
from ranch.api.models import Ack, Delta, Frame, Ping, Subscribe, Unsubscribe
from ranch.api.services import ApiServices
from ranch.api.wsframes import DirectSocket
from ranch.db.engine import unavailable
from ranch.db.models import Execution, PrunedEvents, Room
from ranch.deprecation import RanchDeprecationWarning, deprecation_message, warn_deprecated
from ranch.edge.guards import caller_key
from ranch.exceptions import (
    Conflict,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    RanchError,
    RateLimited,
    Unauthorized,
)
from ranch.identity.principal import Principal
from ranch.observe import metrics
from ranch.policy.limits import load_json
from ranch.rooms.access import visible_room
from ranch.rooms.bus import Bus
from ranch.rooms.executions import FINAL
from ranch.rooms.runtime import RoomsRuntime
from ranch.rooms.watchers import Outgoing, Watcher, encoded, note

MAX_ROOMS = 100
"""Rooms one connection may watch."""
SUBSCRIBE = "ranch.subscribe"
"""Internal frame: the reader asks the writer to replay and start rooms (never sent)."""
CLOSE = "ranch.close"
"""Internal frame: the reader asks the writer to close the socket with `code` (never sent)."""
CLOSE_WAIT_S = 5.0
"""How long a connection that fell behind waits for room to send its 1013 close frame."""
UNSUPPORTED_DATA = 1003
UNAUTHENTICATED = 4401
INTERNAL_ERROR = 1011
TRY_AGAIN_LATER = 1013
FRAMES: TypeAdapter[Frame] = TypeAdapter(cast(Any, Frame))  # an Annotated union
OLD_SUBSCRIBE = "the WebSocket subscribe frame with a list of rooms and one cursor"
NEW_SUBSCRIBE = 'a cursor per room, {"type": "subscribe", "rooms": {"<room id>": <cursor>}}'
DEPRECATED_SINCE, REMOVED_IN = "0.1.0", "0.2.0"
logger = logging.getLogger(__name__)


WebSocketEndpoint = Callable[[WebSocket], Awaitable[None]]


def websocket_endpoint(services: ApiServices) -> WebSocketEndpoint:
    """The endpoint of /api/v1/ws, over `services`."""

    async def endpoint(websocket: WebSocket) -> None:
        await serve(websocket, services)

    return endpoint


async def serve(websocket: WebSocket, services: ApiServices) -> None:
    runtime = services.runtime()
    try:
        known = await services.security.keys.fresh_key(websocket)
    except RanchError as exc:
        await websocket.accept()
        await _send_json(websocket, _error_frame(exc))
        if isinstance(exc, RateLimited):  # too many refused keys from this address
            await websocket.close(code=4429, reason="too many failed authentications")
        else:
            await websocket.close(code=4401, reason="unauthenticated")
        return
    except Exception as exc:  # the key could not be looked up: the database (or its pool) is busy
        failure = unavailable(exc, "the key of a WebSocket")
        if failure is None:
            raise
        await websocket.accept()
        await _send_json(websocket, _error_frame(failure))
        await websocket.close(code=TRY_AGAIN_LATER, reason="the database is unavailable; try again")
        return
    principal = known.principal
    watcher = runtime.bus.watch(principal.id if principal.kind == "agent" else None, principal)
    # registered before the accept: a key revoked from the lookup on ends this connection too
    live = services.security.live.open(known.key_id, known.expires_at, partial(_key_ended, watcher))
    metrics.websockets(+1)
    try:
        await websocket.accept()
        # while its writer waits, the room's events go straight to the socket (api/wsframes.py)
        watcher.direct = DirectSocket.of(websocket._send, watcher.rooms)
        if watcher.ended is not None:  # revoked (or expired) while the connection was accepted
            await _refuse(websocket, watcher.ended)
            return
        if principal.kind == "agent":
            async for page in pending_pages(runtime.sessions, principal.id):
                for delivery in page:
                    if watcher.ended is None:
                        await _send(websocket, delivery.model_dump_json())
        await _converse(websocket, services, principal, watcher)
    except WebSocketDisconnect:
        pass
    except Exception as exc:  # the reader and the writer end the socket themselves; this is the rest
        logger.exception("a WebSocket connection of %s:%s failed", principal.kind, principal.id)
        await _fail(websocket, exc)
    finally:
        metrics.websockets(-1)
        services.security.live.close(live)
        runtime.bus.unwatch(watcher)


def _key_ended(watcher: Watcher, reason: Unauthorized) -> None:
    """The key was revoked or expired: the writer sends nothing more but `reason`, then closes 4401."""
    watcher.end(reason)


async def _converse(
    websocket: WebSocket, services: ApiServices, principal: Principal, watcher: Watcher
) -> None:
    """Write the watcher's frames here while a second task reads the client's; either ending ends
    both. The reader is a plain task this connection owns (cancelled and awaited here): anyio's task
    group would cost each idle watcher more memory (bench/README.md)."""
    reader = asyncio.ensure_future(_read(websocket, services, principal, watcher))
    reader.add_done_callback(lambda _reader: watcher.close())  # the client left, or asked to close
    try:
        await _write(websocket, services.runtime(), watcher)
    finally:
        reader.cancel()
        await asyncio.wait([reader])
        failure = None if reader.cancelled() else reader.exception()
    with anyio.move_on_after(CLOSE_WAIT_S, shield=True):  # a client reading nothing never takes it
        if watcher.ended is not None:
            await _refuse(websocket, watcher.ended)
        elif watcher.fell_behind:
            await _close(websocket, TRY_AGAIN_LATER, "fell behind; reconnect with your last cursors")
    if failure is not None:
        raise failure


async def _read(websocket: WebSocket, services: ApiServices, principal: Principal, watcher: Watcher) -> None:
    runtime = services.runtime()
    limit = services.max_frame_bytes
    while True:
        message = await websocket.receive()
        if message["type"] == "websocket.disconnect":
            return
        raw = message.get("text")
        if raw is None:
            refused = InvalidInput("frames must be text (JSON); binary frames are not accepted", "frame")
            await _close_after(runtime, watcher, refused, UNSUPPORTED_DATA, "binary frames are not accepted")
        try:
            await services.security.keys(websocket)  # a key revoked or expired since connecting ends it here
        except RateLimited:
            pass  # the address's refused-keys budget is spent (by others): this key was valid; go on
        except Unauthorized as exc:
            watcher.end(exc)
            return
        try:
            key, decision = await services.rates.admit(caller_key(principal), "")
            if not decision.allowed:
                raise RateLimited(key, decision.retry_after)
            if len(raw) > limit:
                raise PayloadTooLarge(len(raw), limit, "frame")
            reply = await _handle(runtime, principal, watcher, raw)
        except RanchError as exc:
            reply = encoded(_error_frame(exc))
        except Exception as exc:
            failure = unavailable(exc, f"a WebSocket frame of {principal.kind}:{principal.id}")
            if failure is None:
                logger.exception("a WebSocket frame of %s:%s failed", principal.kind, principal.id)
                await _close_after(runtime, watcher, exc, INTERNAL_ERROR, "internal error")
            # the database is unavailable: the frame failed, the socket stays
            reply = encoded(_error_frame(failure))
        if reply is not None and not runtime.bus.reply(watcher, reply):
            return  # too far behind to be answered: the writer closes it (1013)


def _error_frame(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, CursorPruned):  # which room, and where it may resume, for a client to act on
        return {"type": "error", **errors.body(exc), "room": exc.room, "oldest_cursor": exc.oldest}
    if isinstance(exc, CursorAhead):
        return {"type": "error", **errors.body(exc), "room": exc.room, "newest_cursor": exc.newest}
    return {"type": "error", **errors.body(exc)}


async def _close_after(
    runtime: RoomsRuntime, watcher: Watcher, exc: BaseException, code: int, reason: str
) -> NoReturn:
    """Have the writer send the error frame for `exc`, then close with `code`; this task waits to
    be cancelled as the connection ends (sending both here would race the writer)."""
    runtime.bus.reply(watcher, encoded(_error_frame(exc)))
    runtime.bus.reply(watcher, note({"type": CLOSE, "code": code, "reason": reason}))
    await anyio.sleep_forever()
    raise AssertionError("unreachable: the writer ends the connection")


async def _handle(runtime: RoomsRuntime, principal: Principal, watcher: Watcher, raw: str) -> Outgoing | None:
    try:
        value = load_json(raw)
    except ValueError as exc:  # not JSON, or nested too deep
        raise InvalidInput(f"a frame must be JSON: {exc}", "frame") from exc
    if not isinstance(value, dict):
        raise InvalidInput("a frame must be a JSON object", "frame")
    frame = errors.parsed(FRAMES, value)
    match frame:
        case Ping():
            return encoded({"type": "pong"})
        case Subscribe():  # the writer replays, in order with the frames before it
            return note(await _subscription(runtime, principal, watcher, frame))
        case Unsubscribe():
            rooms = list(dict.fromkeys(frame.rooms))
            runtime.bus.unsubscribe(watcher, rooms)
            return encoded({"type": "unsubscribed", "rooms": rooms})
        case Delta():
            await _delta(runtime, principal, frame)
            return None
        case Ack():
            if principal.kind != "agent":
                raise NotFound(f"no delivery '{frame.delivery_id}'", "delivery_id")
            await acknowledge(runtime.sessions, principal, frame.delivery_id)
            return encoded({"type": "acked", "delivery_id": frame.delivery_id})
        case _:
            assert_never(frame)


async def _subscription(
    runtime: RoomsRuntime, principal: Principal, watcher: Watcher, frame: Subscribe
) -> dict[str, Any]:
    """The writer's note for a `subscribe`: each room's cursor, checked (the rooms exist, the
    caller sees them, at most MAX_ROOMS on the connection); the old form's, with its note."""
    asked: dict[str, Any] = {"type": SUBSCRIBE}
    if isinstance(frame.rooms, dict):
        if frame.cursor is not None:
            raise InvalidInput(
                "give each room's cursor in rooms; cursor goes only with a list of rooms", "cursor"
            )
        cursors = frame.rooms
    else:  # the deprecated form: one cursor for every room listed
        cursors = dict.fromkeys(frame.rooms, frame.cursor or 0)
        asked.update(old=list(cursors), cursor=frame.cursor or 0, deprecation=_deprecated())
    if len(watcher.rooms.keys() | cursors.keys()) > MAX_ROOMS:
        raise InvalidInput(f"at most {MAX_ROOMS} rooms per connection", "rooms")
    async with runtime.sessions() as session:
        for room, cursor in cursors.items():
            found = await visible_room(session, principal, room)
            if "old" not in asked and cursor > found.last_event:  # (the deprecated form keeps its way)
                raise CursorAhead(room, cursor, found.last_event)
            await _resumable(session, found, cursor)
    return {**asked, "cursors": cursors}


class CursorAhead(InvalidInput):
    """A cursor past a room's newest event: no event would ever be sent after it (its room counts
    its own events), so the subscribe is refused, naming the cursor to use."""

    def __init__(self, room: str, cursor: int, newest: int) -> None:
        super().__init__(
            f"cursor {cursor} of room '{room}' is past its newest event ({newest}): nothing after it "
            f"would ever come; subscribe from {newest} for new events only, or from 0 for all",
            f"rooms.{room}",
        )
        self.room = room
        self.newest = newest


class CursorPruned(Conflict):
    """A cursor older than a room's oldest kept event: retention pruned the events after it."""

    def __init__(self, room: str, cursor: int, oldest: int) -> None:
        super().__init__(
            f"cursor {cursor} of room '{room}' is older than its oldest kept event: the events after "
            f"it were pruned (retention); resume from cursor {oldest}, or read the room's messages",
            f"rooms.{room}",
        )
        self.room = room
        self.oldest = oldest


async def _resumable(session: AsyncSession, room: Room, cursor: int) -> None:
    """CursorPruned when events after `cursor` were pruned; one primary-key read, and only when
    there is something to replay."""
    if cursor >= room.last_event:
        return
    through = await session.scalar(select(PrunedEvents.through).where(PrunedEvents.room_id == room.id))
    if through is not None and cursor < through:
        raise CursorPruned(room.id, cursor, through)


def _deprecated() -> str:
    """The deprecation note of the old `subscribe` form, warned once per process in the server's log."""
    # a client's old frame never fails the server, whatever the process's warning filters say
    with contextlib.suppress(RanchDeprecationWarning):
        warn_deprecated(OLD_SUBSCRIBE, since=DEPRECATED_SINCE, removal=REMOVED_IN, use=NEW_SUBSCRIBE)
    return deprecation_message(OLD_SUBSCRIBE, since=DEPRECATED_SINCE, removal=REMOVED_IN, use=NEW_SUBSCRIBE)


async def _delta(runtime: RoomsRuntime, principal: Principal, frame: Delta) -> None:
    """An external agent's streamed text, shown live in the room its execution works in."""
    async with runtime.sessions() as session:
        execution = None
        if principal.kind == "agent":
            execution = await session.scalar(
                select(Execution.id)
                .where(
                    Execution.room_id == frame.room_id,
                    Execution.agent_id == principal.id,
                    Execution.status.not_in(FINAL),
                )
                .order_by(Execution.created_at.desc())
                .limit(1)
            )
        if execution is None:
            raise Conflict(f"agent '{principal.id}' is not answering in room '{frame.room_id}'", "room_id")
    data = {"execution_id": execution, "agent": principal.id, "text": frame.text, "append": frame.append}
    runtime.bus.live(frame.room_id, "message.delta", data)


async def _write(websocket: WebSocket, runtime: RoomsRuntime, watcher: Watcher) -> None:
    """Send the watcher's frames in order until it is closed (too slow, or the reader ended), its key
    ends, or the reader asks for a close."""
    bus = runtime.bus
    while (item := await watcher.next()) is not None:
        if item.text is not None:
            if watcher.fresh(item):
                await _send(websocket, item.text)
        elif item.payload["type"] == CLOSE:
            await _close(websocket, item.payload["code"], item.payload["reason"])
            return
        elif not await _replay(websocket, bus, watcher, item.payload):
            return  # fell behind (or ended) mid-replay: queued live frames come after a gap


async def _replay(websocket: WebSocket, bus: Bus, watcher: Watcher, asked: dict[str, Any]) -> bool:
    """Start the rooms of `asked` and send each one's events after its cursor, a bounded page at a
    time, before the live ones queued meanwhile; False if the watcher fell behind (its queue
    overflowed) or its key ended during it."""
    cursors: dict[str, int] = asked["cursors"]
    upto = await bus.subscribe(watcher, cursors)
    replayed = await bus.backlog_size(cursors, upto)
    await _send_json(websocket, _subscribed(asked, upto, replayed))
    async for page in bus.replay(cursors, upto):
        for event in page:
            if watcher.closed or watcher.ended is not None:
                return False
            if watcher.fresh_event(event):
                await _send_json(websocket, event)
    return not watcher.closed and watcher.ended is None


def _subscribed(asked: dict[str, Any], upto: dict[str, int], replayed: int) -> dict[str, Any]:
    """`subscribed`: each room's cursor the replay starts after (`rooms`), the cursor up to which it
    replays (`upto`: later events come live) and how many events it holds; the old form's answer
    keeps its shape (`rooms` a list, one `cursor`) and adds the deprecation note."""
    if "old" in asked:
        return {
            "type": "subscribed",
            "rooms": asked["old"],
            "cursor": asked["cursor"],
            "upto": upto,
            "replayed": replayed,
            "deprecation": asked["deprecation"],
        }
    return {"type": "subscribed", "rooms": asked["cursors"], "upto": upto, "replayed": replayed}


async def _send(websocket: WebSocket, text: str) -> None:
    await websocket.send({"type": "websocket.send", "text": text})


async def _send_json(websocket: WebSocket, payload: dict[str, Any]) -> None:
    await _send(websocket, orjson.dumps(payload).decode())


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    """Close with `code`, unless the socket is gone already."""
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
        await websocket.close(code=code, reason=reason)


async def _refuse(websocket: WebSocket, reason: Unauthorized) -> None:
    """The key ended: an UNAUTHENTICATED error frame, then close 4401, unless the socket is gone."""
    await _end_with(websocket, reason, UNAUTHENTICATED, "unauthenticated")


async def _fail(websocket: WebSocket, exc: BaseException) -> None:
    """The error frame for an unexpected failure, then close 1011, unless the socket is gone."""
    await _end_with(websocket, exc, INTERNAL_ERROR, "internal error")


async def _end_with(websocket: WebSocket, exc: BaseException, code: int, reason: str) -> None:
    """`exc`'s error frame, then close with `code`; a client already gone is not an error."""
    try:
        await _send_json(websocket, _error_frame(exc))
        await websocket.close(code=code, reason=reason)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass  # the client left; there is no one to tell
