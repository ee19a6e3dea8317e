"""REST endpoints under /api/v1 (docs/api.md); each is auth, parse, one service call, a view."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from google.protobuf.json_format import MessageToDict
from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from ranch.api import errors
from ranch.api.ws import websocket_endpoint
from ranch.catalog import records
from ranch.catalog.cards import served_card
from ranch.db.models import AgentRecord, Delivery, Organization, RoomMessage, User
from ranch.edge.guards import principal_of
from ranch.exceptions import Conflict, Forbidden, InvalidInput, NotFound, RanchError
from ranch.identity import keys
from ranch.identity.keys import issue_key
from ranch.identity.principal import Principal
from ranch.identity.visibility import usable_agent, usable_agents
from ranch.ids import new_id
from ranch.policy.limits import MAX_INT, load_json
from ranch.rooms import views
from ranch.rooms.runtime import RoomsRuntime

PREFIX = "/api/v1"
DEFAULT_LIMIT = 50
MAX_LIMIT = 200

Handler = Callable[[Request, Principal, RoomsRuntime], Awaitable[Any]]


def endpoint(handler: Handler, status: int = 200) -> Callable[[Request], Awaitable[Response]]:
    """Run the handler as the key holder the edge authenticated, and turn its result (or a RanchError)
    into JSON; without a key, 401."""

    async def wrapped(request: Request) -> Response:
        runtime: RoomsRuntime = request.app.state.hub.rooms
        try:
            result = await handler(request, principal_of(request.scope), runtime)
        except RanchError as exc:
            return errors.response(exc, debug=request.app.state.hub.settings.debug)
        if isinstance(result, Response):
            return result
        return JSONResponse(result, status_code=status)

    return wrapped


async def json_body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    try:
        value = load_json(raw) if raw else None
    except ValueError as exc:  # invalid UTF-8 or JSON, or nested too deep
        raise InvalidInput(f"the body is not valid JSON: {exc}", "body") from exc
    if not isinstance(value, dict):
        raise InvalidInput("the body must be a JSON object", "body")
    return value


def int_param(request: Request, name: str, default: int, low: int, high: int = MAX_INT) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be an integer", name) from None
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be between {low} and {high}", name)
    return value


def page(items: list[Any], next_cursor: str | int | None) -> dict[str, Any]:
    return {"items": items, "next_cursor": None if next_cursor is None else str(next_cursor)}


def base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


# -- identity, organizations, users ------------------------------------------------------------------


async def me(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    async with rt.sessions() as session:
        org = await session.get(Organization, who.org_id)
    return {
        "kind": who.kind,
        "id": who.id,
        "name": who.name,
        "role": who.role if who.kind == "user" else None,
        "org": {"id": who.org_id, "name": org.name if org else who.org_id},
    }


async def create_org(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    if not who.is_superuser:
        raise Forbidden("only the server's superuser may create organizations")
    body = await json_body(request)
    org_id = records.check_id(body.get("id"))
    urls = _urls(body.get("allowed_agent_urls", []))
    async with rt.sessions() as session, session.begin():
        if await session.get(Organization, org_id) is not None:
            raise Conflict(f"the organization id '{org_id}' is taken", "id")
        org = Organization(id=org_id, name=str(body.get("name") or org_id), allowed_agent_urls=urls)
        session.add(org)
        owner_id = str(body.get("owner_id") or f"{org_id}-owner")
        if await session.get(User, owner_id) is not None:
            raise Conflict(f"the user id '{owner_id}' is taken", "owner_id")
        owner = User(id=owner_id, org_id=org_id, name=str(body.get("owner_name") or owner_id), role="owner")
        session.add(owner)
        await session.flush()
        key = await issue_key(session, org_id, "user", owner_id)
    return JSONResponse(
        {"organization": views.organization(org), "owner": {"user": views.user(owner), "api_key": key}},
        status_code=201,
    )


async def current_org(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    async with rt.sessions() as session:
        org = await session.get(Organization, who.org_id)
        if org is None:
            raise NotFound("the organization no longer exists", None)
        return views.organization(org)


async def update_org(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    who.require_admin("change the organization")
    body = await json_body(request)
    async with rt.sessions() as session, session.begin():
        org = await session.get(Organization, who.org_id)
        if org is None:
            raise NotFound("the organization no longer exists", None)
        if "name" in body:
            if not isinstance(body["name"], str) or not body["name"].strip():
                raise InvalidInput("name must be a non-empty string", "name")
            org.name = body["name"]
        if "allowed_agent_urls" in body:
            org.allowed_agent_urls = _urls(body["allowed_agent_urls"])
        return views.organization(org)


def _urls(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(
        isinstance(u, str) and u.startswith(("http://", "https://")) for u in value
    ):
        raise InvalidInput("allowed_agent_urls must be a list of http(s) URL prefixes", "allowed_agent_urls")
    return list(value)


async def list_users(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    async with rt.sessions() as session:
        rows = (await session.scalars(select(User).where(User.org_id == who.org_id).order_by(User.id))).all()
    return page([views.user(row) for row in rows], None)


async def create_user(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    who.require_admin("create users")
    body = await json_body(request)
    user_id = records.check_id(body.get("id") or new_id())
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidInput("name must be a non-empty string", "name")
    role = body.get("role", "member")
    if role not in ("owner", "admin", "member"):
        raise InvalidInput("role must be owner, admin or member", "role")
    async with rt.sessions() as session, session.begin():
        if await session.get(User, user_id) is not None:
            raise Conflict(f"the user id '{user_id}' is taken", "id")
        user = User(id=user_id, org_id=who.org_id, name=name, role=role)
        session.add(user)
        await session.flush()
        key = await issue_key(session, who.org_id, "user", user_id)
    return JSONResponse({"user": views.user(user), "api_key": key}, status_code=201)


# -- API keys ------------------------------------------------------------------------------------------


async def create_key(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    body = await json_body(request)
    async with rt.sessions() as session, session.begin():
        row, key = await keys.create(session, who, body)
    return JSONResponse({"key": views.api_key(row), "api_key": key}, status_code=201)


async def list_keys(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    async with rt.sessions() as session:
        rows = await keys.listed(session, who)
    return page([views.api_key(row) for row in rows], None)


async def revoke_key(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    async with rt.sessions() as session, session.begin():
        row = await keys.revoke(session, who, request.path_params["key_id"])
    request.app.state.hub.security.keys.forget(row.id)  # cached on A2A and /mcp: gone at once
    return views.api_key(row)


# -- agents --------------------------------------------------------------------------------------------


async def list_agents(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    async with rt.sessions() as session:
        rows = (
            await session.scalars(select(AgentRecord).where(usable_agents(who)).order_by(AgentRecord.id))
        ).all()
    return page([views.agent(row, base_url(request)) for row in rows], None)


async def create_agent(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    body = await json_body(request)
    guard = request.app.state.hub.guard
    row, key = await records.register(rt.sessions, who, body, rt.registry, rt.group, guard)
    result: dict[str, Any] = {"agent": views.agent(row, base_url(request))}
    if key is not None:
        result["api_key"] = key
    return JSONResponse(result, status_code=201)


async def get_agent(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    async with rt.sessions() as session, session.begin():
        row = await usable_agent(session, who, request.path_params["agent_id"], "agent_id")
        await records.refresh_card(row, rt.registry)
    view = views.agent(row, base_url(request))
    view["card"] = row.card
    if row.id in rt.registry and row.card is None:
        view["card"] = MessageToDict(await served_card(rt.registry.get(row.id), base_url(request)))
    return view


async def delete_agent(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    who.require_admin("remove agents")
    agent_id = request.path_params["agent_id"]
    async with rt.sessions() as session, session.begin():
        row = await session.get(AgentRecord, agent_id)
        if row is None or row.org_id != who.org_id or row.source != "api":
            raise NotFound(f"no agent '{agent_id}' registered by organization '{who.org_id}'", "agent_id")
        await session.delete(row)
    await rt.registry.remove(agent_id)
    request.app.state.hub.security.access.forget(agent_id)  # its visibility is not cached past removal
    return Response(status_code=204)


# -- rooms ---------------------------------------------------------------------------------------------


async def list_rooms(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    rows, next_cursor = await rt.rooms.list_rooms(who, limit, request.query_params.get("cursor"))
    return page([views.room(row) for row in rows], next_cursor)


async def create_room(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    room = await rt.rooms.create(who, await json_body(request))
    return JSONResponse(views.room(room), status_code=201)


async def get_room(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    return views.room(await rt.rooms.get(who, request.path_params["room_id"]))


async def update_room(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    return views.room(await rt.rooms.update(who, request.path_params["room_id"], await json_body(request)))


async def list_participants(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    return page(await rt.rooms.participants(who, request.path_params["room_id"]), None)


async def add_participant(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    added = await rt.rooms.add_participant(who, request.path_params["room_id"], await json_body(request))
    return JSONResponse(added, status_code=201)


async def remove_participant(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    params = request.path_params
    await rt.rooms.remove_participant(who, params["room_id"], params["kind"], params["ref"])
    return Response(status_code=204)


async def post_message(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    sessions = request.app.state.hub.security.sessions
    if sessions is not None:  # the room is the context: one session per (caller, room), as on A2A
        sessions.touch(f"{who.kind}:{who.id}", request.path_params["room_id"])
    message = await rt.rooms.post(who, request.path_params["room_id"], await json_body(request))
    return JSONResponse(views.message(message), status_code=201)


async def list_messages(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    since = int_param(request, "since", 0, 0)
    limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    rows = await rt.rooms.messages(who, request.path_params["room_id"], since, limit)
    return page([views.message(row) for row in rows], rows[-1].seq if len(rows) == limit else None)


async def list_events(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    since = int_param(request, "since", 0, 0)
    limit = int_param(request, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    items = await rt.rooms.events(who, request.path_params["room_id"], since, limit)
    return page(items, items[-1]["cursor"] if len(items) == limit else None)


# -- executions ----------------------------------------------------------------------------------------


async def room_executions(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    rows = await rt.rooms.executions(who, request.path_params["room_id"])
    return page([views.execution(row) for row in rows], None)


async def get_execution(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    return views.execution(await rt.rooms.execution(who, request.path_params["execution_id"]))


async def execution_task(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    raw = request.query_params.get("history_length")
    limit = None if raw is None else int_param(request, "history_length", 0, 0)
    task = await rt.rooms.task(who, request.path_params["execution_id"], limit)
    return MessageToDict(task)


async def cancel_execution(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    return views.execution(await rt.rooms.cancel(who, request.path_params["execution_id"]))


# -- external agents' inbox ----------------------------------------------------------------------------


async def next_delivery(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    if who.kind != "agent":
        raise Forbidden("only an agent's key has an inbox")
    async with rt.sessions() as session:
        row = await session.scalar(
            select(Delivery)
            .where(Delivery.agent_id == who.id, Delivery.status == "pending")
            .order_by(Delivery.message_seq)
            .limit(1)
        )
        if row is None:
            return Response(status_code=204)
        message = await session.get(RoomMessage, row.message_seq)
        if message is None:  # pragma: no cover - messages are never deleted without their room
            raise NotFound("the message was removed", None)
    return views.delivery(row, message)


async def ack_delivery(request: Request, who: Principal, rt: RoomsRuntime) -> Any:
    await acknowledge(rt, who, request.path_params["delivery_id"])
    return Response(status_code=204)


async def acknowledge(rt: RoomsRuntime, who: Principal, delivery_id: str) -> None:
    async with rt.sessions() as session, session.begin():
        row = await session.get(Delivery, delivery_id)
        if row is None or row.agent_id != who.id:
            raise NotFound(f"no delivery '{delivery_id}' for agent '{who.id}'", "delivery_id")
        row.status = "done"


def routes() -> list[BaseRoute]:
    """Every REST route; the edge's guards (trace id, key, rate limit) ran before each, as on A2A."""

    def r(path: str, handler: Handler, methods: list[str], status: int = 200) -> Route:
        return Route(f"{PREFIX}{path}", endpoint(handler, status), methods=methods)

    return [
        r("/me", me, ["GET"]),
        r("/organizations", create_org, ["POST"]),
        r("/organizations/current", current_org, ["GET"]),
        r("/organizations/current", update_org, ["PATCH"]),
        r("/users", list_users, ["GET"]),
        r("/users", create_user, ["POST"]),
        r("/keys", list_keys, ["GET"]),
        r("/keys", create_key, ["POST"]),
        r("/keys/{key_id}/revoke", revoke_key, ["POST"]),
        r("/agents", list_agents, ["GET"]),
        r("/agents", create_agent, ["POST"]),
        r("/agents/{agent_id}", get_agent, ["GET"]),
        r("/agents/{agent_id}", delete_agent, ["DELETE"]),
        r("/rooms", list_rooms, ["GET"]),
        r("/rooms", create_room, ["POST"]),
        r("/rooms/{room_id}", get_room, ["GET"]),
        r("/rooms/{room_id}", update_room, ["PATCH"]),
        r("/rooms/{room_id}/participants", list_participants, ["GET"]),
        r("/rooms/{room_id}/participants", add_participant, ["POST"]),
        r("/rooms/{room_id}/participants/{kind}/{ref}", remove_participant, ["DELETE"]),
        r("/rooms/{room_id}/messages", post_message, ["POST"]),
        r("/rooms/{room_id}/messages", list_messages, ["GET"]),
        r("/rooms/{room_id}/events", list_events, ["GET"]),
        r("/rooms/{room_id}/executions", room_executions, ["GET"]),
        r("/executions/{execution_id}", get_execution, ["GET"]),
        r("/executions/{execution_id}/task", execution_task, ["GET"]),
        r("/executions/{execution_id}/cancel", cancel_execution, ["POST"]),
        r("/agent/messages/next", next_delivery, ["GET"]),
        r("/agent/messages/{delivery_id}/ack", ack_delivery, ["POST"]),
        WebSocketRoute(f"{PREFIX}/ws", websocket_endpoint),
    ]
