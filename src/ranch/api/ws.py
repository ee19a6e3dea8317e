"""WebSocket /api/v1/ws: subscribe to rooms, replay from a cursor, then live events.

One task reads the client's frames (subscribe, unsubscribe, ack, ping), one
writes the watcher's queue to the socket; either ending closes both. An agent
key also receives its unacknowledged deliveries on connect and new ones live.
A connection never just drops: a binary frame gets an error frame and a close
with 1003, an unexpected failure an error frame and a close with 1011.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, NoReturn, assert_never, cast

import anyio
from pydantic import TypeAdapter
from sqlalchemy import select
from starlette.websockets import WebSocket, WebSocketDisconnect

from ranch.api import errors
from ranch.api.inbox import acknowledge, pending_pages
from ranch.api.models import Ack, Delta, Frame, Ping, Subscribe, Unsubscribe
from ranch.api.services import ApiServices
from ranch.db.engine import unavailable
from ranch.db.models import Execution
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
from ranch.rooms.executions import FINAL
from ranch.rooms.runtime import RoomsRuntime
from ranch.rooms.watchers import Watcher

MAX_ROOMS = 100
"""Rooms one connection may watch."""
SUBSCRIBE = "ranch.subscribe"
"""Internal frame: the reader asks the writer to replay and start a room (never sent)."""
CLOSE = "ranch.close"
"""Internal frame: the reader asks the writer to close the socket with `code` (never sent)."""
CLOSE_WAIT_S = 5.0
"""How long a connection that fell behind waits for room to send its 1013 close frame."""
UNSUPPORTED_DATA = 1003
UNAUTHENTICATED = 4401
INTERNAL_ERROR = 1011
FRAMES: TypeAdapter[Frame] = TypeAdapter(cast(Any, Frame))  # an Annotated union
logger = logging.getLogger(__name__)


def websocket_endpoint(services: ApiServices) -> Callable[[WebSocket], Awaitable[None]]:
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
        await websocket.send_json({"type": "error", **errors.body(exc)})
        if isinstance(exc, RateLimited):  # too many refused keys from this address
            await websocket.close(code=4429, reason="too many failed authentications")
        else:
            await websocket.close(code=4401, reason="unauthenticated")
        return
    await websocket.accept()
    principal = known.principal
    watcher = runtime.bus.watch(principal.id if principal.kind == "agent" else None, principal)
    live = services.security.live.open(known.key_id, known.expires_at, partial(_key_ended, watcher))
    metrics.websockets(+1)
    try:
        if principal.kind == "agent":
            async for page in pending_pages(runtime.sessions, principal.id):
                for delivery in page:
                    await websocket.send_json(delivery.model_dump(mode="json"))
        async with anyio.create_task_group() as group:
            group.start_soon(_write, websocket, runtime, watcher, group.cancel_scope)
            await _read(websocket, services, principal, watcher)
            group.cancel_scope.cancel()
    except WebSocketDisconnect:
        pass
    except Exception as exc:  # the reader and the writer handle their own; this is the rest
        logger.exception("a WebSocket connection of %s:%s failed", principal.kind, principal.id)
        await _fail(websocket, exc)
    finally:
        metrics.websockets(-1)
        services.security.live.close(live)
        runtime.bus.unwatch(watcher)


def _key_ended(watcher: Watcher, reason: Unauthorized) -> None:
    """The key was revoked or expired: the writer sends nothing more but `reason`, then closes 4401
    (woken by a frame, or at its next one when the queue is full)."""
    watcher.ended = reason
    with contextlib.suppress(anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
        watcher.send.send_nowait({"type": CLOSE, "code": UNAUTHENTICATED, "reason": "unauthenticated"})


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
            await _close_after(watcher, refused, UNSUPPORTED_DATA, "binary frames are not accepted")
        try:
            await services.security.keys(websocket)  # a key revoked or expired since connecting ends it here
        except RateLimited:
            pass  # the address's refused-keys budget is spent (by others): this key was valid; go on
        except Unauthorized as exc:
            await websocket.send_json({"type": "error", **errors.body(exc)})
            await websocket.close(code=UNAUTHENTICATED, reason="unauthenticated")
            return
        try:
            key, decision = await services.rates.admit(caller_key(principal), "")
            if not decision.allowed:
                raise RateLimited(key, decision.retry_after)
            if len(raw) > limit:
                raise PayloadTooLarge(len(raw), limit, "frame")
            reply = await _handle(runtime, principal, watcher, raw)
        except RanchError as exc:
            reply = _error_frame(exc)
        except Exception as exc:
            failure = unavailable(exc, f"a WebSocket frame of {principal.kind}:{principal.id}")
            if failure is None:
                logger.exception("a WebSocket frame of %s:%s failed", principal.kind, principal.id)
                await _close_after(watcher, exc, INTERNAL_ERROR, "internal error")
            reply = _error_frame(failure)  # the database is unavailable: the frame failed, the socket stays
        if reply is not None:
            await watcher.send.send(reply)


def _error_frame(exc: BaseException) -> dict[str, Any]:
    return {"type": "error", **errors.body(exc)}


async def _close_after(watcher: Watcher, exc: BaseException, code: int, reason: str) -> NoReturn:
    """Have the writer send the error frame for `exc`, then close with `code`; this task waits to
    be cancelled as the connection ends (sending both here would race the writer)."""
    await watcher.send.send(_error_frame(exc))
    await watcher.send.send({"type": CLOSE, "code": code, "reason": reason})
    await anyio.sleep_forever()
    raise AssertionError("unreachable: the writer ends the connection")


async def _handle(
    runtime: RoomsRuntime, principal: Principal, watcher: Watcher, raw: str
) -> dict[str, Any] | None:
    try:
        value = load_json(raw)
    except ValueError as exc:  # not JSON, or nested too deep
        raise InvalidInput(f"a frame must be JSON: {exc}", "frame") from exc
    if not isinstance(value, dict):
        raise InvalidInput("a frame must be a JSON object", "frame")
    frame = errors.parsed(FRAMES, value)
    match frame:
        case Ping():
            return {"type": "pong"}
        case Subscribe():
            rooms = list(dict.fromkeys(frame.rooms))
            if len(set(watcher.rooms) | set(rooms)) > MAX_ROOMS:
                raise InvalidInput(f"at most {MAX_ROOMS} rooms per connection", "rooms")
            async with runtime.sessions() as session:
                for room in rooms:
                    await visible_room(session, principal, room)
            return {"type": SUBSCRIBE, "rooms": rooms, "cursor": frame.cursor}  # the writer replays, in order
        case Unsubscribe():
            rooms = list(dict.fromkeys(frame.rooms))
            runtime.bus.unsubscribe(watcher, rooms)
            return {"type": "unsubscribed", "rooms": rooms}
        case Delta():
            await _delta(runtime, principal, frame)
            return None
        case Ack():
            if principal.kind != "agent":
                raise NotFound(f"no delivery '{frame.delivery_id}'", "delivery_id")
            await acknowledge(runtime.sessions, principal, frame.delivery_id)
            return {"type": "acked", "delivery_id": frame.delivery_id}
        case _:
            assert_never(frame)


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


async def _write(
    websocket: WebSocket, runtime: RoomsRuntime, watcher: Watcher, scope: anyio.CancelScope
) -> None:
    try:
        async for payload in watcher.receive:
            if watcher.ended is not None:
                return  # queued frames are checked as they are sent: after the key ended, none is
            if payload["type"] == CLOSE:
                await websocket.close(code=payload["code"], reason=payload["reason"])
                return
            if payload["type"] == SUBSCRIBE:
                if not await _replay(websocket, runtime, watcher, payload["rooms"], payload["cursor"]):
                    return  # evicted mid-replay: queued live frames come after a gap; close 1013
            elif runtime.bus.accept(watcher, payload):
                await websocket.send_json(payload)
    except WebSocketDisconnect:
        pass
    except Exception as exc:
        logger.exception("a WebSocket connection failed while sending")
        await _fail(websocket, exc)
    finally:
        scope.cancel()  # the watcher was closed (too slow) or the socket broke: end the connection
        if watcher.ended is not None:
            with anyio.move_on_after(CLOSE_WAIT_S, shield=True):
                await _refuse(websocket, watcher.ended)
        elif watcher.closed:
            watcher.receive.close()  # what is still queued is not sent: free it now
            with anyio.move_on_after(CLOSE_WAIT_S, shield=True):  # a client reading nothing never takes it
                await websocket.close(code=1013, reason="fell behind; reconnect with your last cursor")


async def _replay(
    websocket: WebSocket, runtime: RoomsRuntime, watcher: Watcher, rooms: list[str], cursor: int
) -> bool:
    """Start `rooms` and send their events after `cursor`, a bounded page at a time, before the live
    ones queued meanwhile; False if the watcher fell behind (its queue overflowed) during it."""
    bus = runtime.bus
    cursors = dict.fromkeys(rooms, cursor)
    upto = await bus.subscribe(watcher, cursors)
    replayed = await bus.backlog_size(cursors, upto)
    await websocket.send_json({"type": "subscribed", "rooms": rooms, "cursor": cursor, "replayed": replayed})
    async for page in bus.replay(cursors, upto):
        for event in page:
            if watcher.closed or watcher.ended is not None:
                return False
            if bus.accept(watcher, event):
                await websocket.send_json(event)
    return not watcher.closed


async def _refuse(websocket: WebSocket, reason: Unauthorized) -> None:
    """The key ended: an UNAUTHENTICATED error frame, then close 4401, unless the socket is gone."""
    await _end_with(websocket, reason, UNAUTHENTICATED, "unauthenticated")


async def _fail(websocket: WebSocket, exc: BaseException) -> None:
    """The error frame for an unexpected failure, then close 1011, unless the socket is gone."""
    await _end_with(websocket, exc, INTERNAL_ERROR, "internal error")


async def _end_with(websocket: WebSocket, exc: BaseException, code: int, reason: str) -> None:
    """`exc`'s error frame, then close with `code`; a client already gone is not an error."""
    try:
        await websocket.send_json(_error_frame(exc))
        await websocket.close(code=code, reason=reason)
    except (WebSocketDisconnect, RuntimeError, OSError):
        pass  # the client left; there is no one to tell
