"""WebSocket /api/v1/ws: subscribe to rooms, replay from a cursor, then live events.

One task reads the client's frames (subscribe, unsubscribe, ack, ping), one
writes the watcher's queue to the socket; either ending closes both. An agent
key also receives its unacknowledged deliveries on connect and new ones live.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from sqlalchemy import select
from starlette.websockets import WebSocket, WebSocketDisconnect

from ranch.api import errors
from ranch.db.models import Delivery, RoomMessage
from ranch.exceptions import (
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    RanchError,
    RateLimited,
    Unauthorized,
)
from ranch.rooms import views
from ranch.rooms.access import Principal, visible_room
from ranch.rooms.bus import Watcher
from ranch.rooms.runtime import RoomsRuntime

MAX_ROOMS = 100
"""Rooms one connection may watch."""
SUBSCRIBE = "ranch.subscribe"
"""Internal frame: the reader asks the writer to replay and start a room (never sent)."""


async def websocket_endpoint(websocket: WebSocket) -> None:
    runtime: RoomsRuntime = websocket.app.state.hub.rooms
    try:
        principal = await websocket.app.state.hub.security.keys.fresh(websocket)
    except RanchError as exc:
        await websocket.accept()
        await websocket.send_json({"type": "error", **errors.body(exc)})
        if isinstance(exc, RateLimited):  # too many refused keys from this address
            await websocket.close(code=4429, reason="too many failed authentications")
        else:
            await websocket.close(code=4401, reason="unauthenticated")
        return
    await websocket.accept()
    watcher = runtime.bus.watch(principal.id if principal.kind == "agent" else None)
    try:
        if principal.kind == "agent":
            for payload in await _pending(runtime, principal.id):
                await websocket.send_json(payload)
        async with anyio.create_task_group() as group:
            group.start_soon(_write, websocket, runtime, watcher, group.cancel_scope)
            await _read(websocket, runtime, principal, watcher)
            group.cancel_scope.cancel()
    except WebSocketDisconnect:
        pass
    finally:
        runtime.bus.unwatch(watcher)


async def _read(websocket: WebSocket, runtime: RoomsRuntime, principal: Principal, watcher: Watcher) -> None:
    hub = websocket.app.state.hub
    limit = hub.settings.max_message_bytes
    while True:
        try:
            raw = await websocket.receive_text()
        except WebSocketDisconnect:
            return
        try:
            await hub.security.keys(websocket)  # a key revoked or expired since connecting ends it here
        except RateLimited:
            pass  # the address's refused-keys budget is spent (by others): this key was valid; go on
        except Unauthorized as exc:
            await websocket.send_json({"type": "error", **errors.body(exc)})
            await websocket.close(code=4401, reason="unauthenticated")
            return
        try:
            key, decision = await hub.rates.admit(f"{principal.kind}:{principal.id}", "")
            if not decision.allowed:
                raise RateLimited(key, decision.retry_after)
            if len(raw) > limit:
                raise PayloadTooLarge(len(raw), limit, "frame")
            reply = await _handle(runtime, principal, watcher, raw)
        except RanchError as exc:
            reply = {"type": "error", **errors.body(exc)}
        if reply is not None:
            await watcher.send.send(reply)


async def _handle(
    runtime: RoomsRuntime, principal: Principal, watcher: Watcher, raw: str
) -> dict[str, Any] | None:
    try:
        frame = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"a frame must be JSON: {exc}", "frame") from exc
    if not isinstance(frame, dict):
        raise InvalidInput("a frame must be a JSON object", "frame")
    kind = frame.get("type")
    if kind == "ping":
        return {"type": "pong"}
    if kind == "subscribe":
        rooms = _rooms(frame)
        cursor = frame.get("cursor", 0)
        if not isinstance(cursor, int) or isinstance(cursor, bool) or cursor < 0:
            raise InvalidInput("cursor must be a non-negative integer", "cursor")
        if len(set(watcher.rooms) | set(rooms)) > MAX_ROOMS:
            raise InvalidInput(f"at most {MAX_ROOMS} rooms per connection", "rooms")
        async with runtime.sessions() as session:
            for room in rooms:
                await visible_room(session, principal, room)
        return {"type": SUBSCRIBE, "rooms": rooms, "cursor": cursor}  # the writer replays, in order
    if kind == "unsubscribe":
        for room in _rooms(frame):
            watcher.rooms.pop(room, None)
        return {"type": "unsubscribed", "rooms": _rooms(frame)}
    if kind == "ack":
        from ranch.api.routes import acknowledge

        delivery_id = frame.get("delivery_id")
        if not isinstance(delivery_id, str):
            raise InvalidInput("delivery_id must be a string", "delivery_id")
        if principal.kind != "agent":
            raise NotFound(f"no delivery '{delivery_id}'", "delivery_id")
        await acknowledge(runtime, principal, delivery_id)
        return {"type": "acked", "delivery_id": delivery_id}
    raise InvalidInput("type must be subscribe, unsubscribe, ack or ping", "type")


def _rooms(frame: dict[str, Any]) -> list[str]:
    rooms = frame.get("rooms")
    if not isinstance(rooms, list) or not rooms or not all(isinstance(r, str) for r in rooms):
        raise InvalidInput("rooms must be a non-empty list of room ids", "rooms")
    return list(dict.fromkeys(rooms))


async def _write(
    websocket: WebSocket, runtime: RoomsRuntime, watcher: Watcher, scope: anyio.CancelScope
) -> None:
    try:
        async for payload in watcher.receive:
            if payload["type"] == SUBSCRIBE:
                backlog = await runtime.bus.subscribe(watcher, payload["rooms"], payload["cursor"])
                await websocket.send_json(
                    {
                        "type": "subscribed",
                        "rooms": payload["rooms"],
                        "cursor": payload["cursor"],
                        "replayed": len(backlog),
                    }
                )
                for event in backlog:
                    await websocket.send_json(event)
            elif runtime.bus.accept(watcher, payload):
                await websocket.send_json(payload)
    finally:
        scope.cancel()  # the watcher was closed (too slow) or the socket broke: end the connection
        if watcher.closed:
            await websocket.close(code=1013, reason="fell behind; reconnect with your last cursor")


async def _pending(runtime: RoomsRuntime, agent_id: str) -> list[dict[str, Any]]:
    async with runtime.sessions() as session:
        rows = (
            await session.scalars(
                select(Delivery)
                .where(Delivery.agent_id == agent_id, Delivery.status == "pending")
                .order_by(Delivery.message_seq)
            )
        ).all()
        result = []
        for row in rows:
            message = await session.get(RoomMessage, row.message_seq)
            if message is not None:
                result.append(views.delivery(row, message))
        return result
