"""REST endpoints under /api/v1 (docs/api.md): the route table, and one handler per operation.

A handler authorizes, reads its body or query with the model the table names, makes one service
call and answers a response model; api/operations.py does the rest (the key, errors, JSON). The
OpenAPI document of the same table is served at /api/v1/openapi.json.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import quote

import orjson
from google.protobuf.json_format import MessageToDict
from sqlalchemy import select
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route

from ranch.agents.base import gather_infos
from ranch.api import openapi
from ranch.api.direct import DirectRoutes
from ranch.api.imports import ImportCatalog, Imported, import_catalog
from ranch.api.inbox import acknowledge, pending
from ranch.api.models import (
    AgentDetail,
    AgentView,
    CompleteExecution,
    CreateOrg,
    CreateUser,
    KeyView,
    Listing,
    Me,
    MeOrg,
    NewKey,
    NewOrganization,
    NewUser,
    OrganizationView,
    Page,
    Registered,
    RegisteredExternal,
    TaskQuery,
    UpdateOrg,
    UserView,
    Window,
)
from ranch.api.operations import Call, Operation, endpoint
from ranch.api.pagereads import held_page
from ranch.api.replaying import ReplayConfigs, ReplayRequest, list_replay_configs, replay_turn
from ranch.api.services import ApiServices
from ranch.api.ws import WebSocketEndpoint, websocket_endpoint
from ranch.catalog import records
from ranch.catalog.cards import served_card
from ranch.catalog.discovery import Wanted
from ranch.catalog.requests import REGISTRATION
from ranch.db.models import AgentRecord, AgentSource, Organization, Role, User
from ranch.exceptions import Conflict, Forbidden, NotFound
from ranch.identity import keys
from ranch.identity.keys import CreateKey, issue_key
from ranch.identity.orgs import own_id
from ranch.identity.principal import session_caller
from ranch.identity.resolver import presented_key
from ranch.identity.visibility import usable_agent, usable_agents
from ranch.ids import new_id
from ranch.policy.limits import MEDIA_TYPE
from ranch.rooms.requests import AddParticipant, CreateRoom, HandOff, PostMessage, UpdateRoom
from ranch.rooms.views import (
    DeliveryView,
    EventView,
    ExecutionDetail,
    ExecutionView,
    MessageView,
    ParticipantView,
    RoomView,
)

PREFIX = "/api/v1"


def base_url(request: Request) -> str:
    return str(request.base_url).rstrip("/")


# -- identity, organizations, users ------------------------------------------------------------------


async def me(call: Call) -> Me:
    caller = call.caller
    async with call.runtime.sessions() as session:
        org = await session.get(Organization, caller.org_id)
    return Me(
        kind=caller.kind,
        id=caller.id,
        name=caller.name,
        role=caller.role if caller.kind == "user" else None,
        org=MeOrg(id=caller.org_id, name=org.name if org else caller.org_id),
    )


async def create_org(call: Call) -> NewOrganization:
    if not call.caller.is_superuser:
        raise Forbidden("only the server's superuser may create organizations")
    body = await call.body(CreateOrg)
    async with call.runtime.sessions() as session, session.begin():
        if await session.get(Organization, body.id) is not None:
            raise Conflict(f"the organization id '{body.id}' is taken", "id")
        org = Organization(id=body.id, name=body.name or body.id, allowed_agent_urls=body.allowed_agent_urls)
        session.add(org)
        owner_id = own_id(body.id, body.owner_id or "owner", "owner_id")
        if await session.get(User, owner_id) is not None:
            raise Conflict(f"the user id '{owner_id}' is taken", "owner_id")
        owner = User(id=owner_id, org_id=body.id, name=body.owner_name or owner_id, role=Role.OWNER)
        session.add(owner)
        await session.flush()
        key = await issue_key(session, body.id, "user", owner_id)
    owner_view = NewUser(user=UserView.model_validate(owner), api_key=key)
    return NewOrganization(organization=OrganizationView.model_validate(org), owner=owner_view)


async def current_org(call: Call) -> OrganizationView:
    async with call.runtime.sessions() as session:
        org = await session.get(Organization, call.caller.org_id)
        if org is None:
            raise NotFound("the organization no longer exists", None)
        return OrganizationView.model_validate(org)


async def update_org(call: Call) -> OrganizationView:
    call.caller.require_admin("change the organization")
    body = await call.body(UpdateOrg)
    async with call.runtime.sessions() as session, session.begin():
        org = await session.get(Organization, call.caller.org_id)
        if org is None:
            raise NotFound("the organization no longer exists", None)
        if body.given("name"):
            org.name = body.name
        if body.given("allowed_agent_urls"):
            org.allowed_agent_urls = body.allowed_agent_urls
        return OrganizationView.model_validate(org)


async def list_users(call: Call) -> Page[UserView]:
    async with call.runtime.sessions() as session:
        query = select(User).where(User.org_id == call.caller.org_id).order_by(User.id)
        rows = (await session.scalars(query)).all()
    return Page(items=[UserView.model_validate(row) for row in rows], next_cursor=None)


async def create_user(call: Call) -> NewUser:
    caller = call.caller
    caller.require_admin("create users")
    body = await call.body(CreateUser)
    user_id = own_id(caller.org_id, body.id) if body.id else new_id()
    async with call.runtime.sessions() as session, session.begin():
        if await session.get(User, user_id) is not None:
            raise Conflict(f"the user id '{user_id}' is taken", "id")
        user = User(id=user_id, org_id=caller.org_id, name=body.name, role=body.role)
        session.add(user)
        await session.flush()
        key = await issue_key(session, caller.org_id, "user", user_id)
    return NewUser(user=UserView.model_validate(user), api_key=key)


# -- API keys ------------------------------------------------------------------------------------------


async def create_key(call: Call) -> NewKey:
    body = await call.body(CreateKey)
    async with call.runtime.sessions() as session, session.begin():
        row, key = await keys.create(session, call.caller, body, presented_key(call.request))
    return NewKey(key=KeyView.model_validate(row), api_key=key)


async def list_keys(call: Call) -> Page[KeyView]:
    async with call.runtime.sessions() as session:
        rows = await keys.listed(session, call.caller)
    return Page(items=[KeyView.model_validate(row) for row in rows], next_cursor=None)


async def revoke_key(call: Call) -> KeyView:
    async with call.runtime.sessions() as session, session.begin():
        row, revoked = await keys.revoke(session, call.caller, call.param("key_id"))
    await _forget_keys(call, revoked)
    return KeyView.model_validate(row)


async def _forget_keys(call: Call, key_ids: list[str]) -> None:
    """Revoked keys are cached on A2A and /mcp, on every replica: gone at once."""
    for key_id in key_ids:
        await call.services.changes.key_revoked(key_id)


# -- agents --------------------------------------------------------------------------------------------


async def list_agents(call: Call) -> Page[AgentView]:
    wanted = call.query(Wanted)  # the filters every agent list reads (catalog/discovery.py)
    async with call.runtime.sessions() as session:
        query = select(AgentRecord).where(usable_agents(call.caller)).order_by(AgentRecord.id)
        rows = list((await session.scalars(query)).all())
    if wanted.given:  # by what their served cards say; an external agent has no card to match
        registry = call.runtime.registry
        served = [row for row in rows if row.id in registry]
        infos = await gather_infos([registry.get(row.id) for row in served])
        rows = [row for row, info in zip(served, infos, strict=True) if wanted.matches(info)]
    base = base_url(call.request)
    return Page(items=[AgentView.of(row, base) for row in rows], next_cursor=None)


async def create_agent(call: Call) -> Registered:
    call.caller.require_admin("register agents")
    body = await call.body(REGISTRATION)
    runtime = call.runtime
    row, key = await records.register(
        runtime.sessions, call.caller, body, runtime.registry, runtime.group, call.services.guard
    )
    await call.services.changes.agent_changed(row.id)  # every replica serves it
    agent = AgentView.of(row, base_url(call.request))
    return Registered(agent=agent) if key is None else RegisteredExternal(agent=agent, api_key=key)


async def get_agent(call: Call) -> AgentDetail:
    runtime = call.runtime
    async with runtime.sessions() as session, session.begin():
        row = await usable_agent(session, call.caller, call.param("agent_id"), "agent_id")
        await records.refresh_card(row, runtime.registry)
    base = base_url(call.request)
    card = row.card
    if row.id in runtime.registry and card is None:
        card = MessageToDict(await served_card(runtime.registry.get(row.id), base))
    return AgentDetail.model_validate({**AgentView.of(row, base).model_dump(), "card": card})


async def delete_agent(call: Call) -> Response:
    caller = call.caller
    caller.require_admin("remove agents")
    agent_id = call.param("agent_id")
    async with call.runtime.sessions() as session, session.begin():
        row = await session.get(AgentRecord, agent_id)
        if row is None or row.org_id != caller.org_id or row.source != AgentSource.API:
            raise NotFound(f"no agent '{agent_id}' registered by organization '{caller.org_id}'", "agent_id")
        await session.delete(row)
        revoked = await keys.revoke_owned(session, "agent", agent_id)  # not inherited by a later namesake
    await call.runtime.registry.remove(agent_id)
    await call.services.changes.agent_changed(agent_id)  # every replica stops serving it
    await _forget_keys(call, revoked)
    return Response(status_code=204)


# -- rooms ---------------------------------------------------------------------------------------------


async def list_rooms(call: Call) -> Page[RoomView]:
    query = call.query(Listing)
    rows, next_cursor = await call.runtime.rooms.list_rooms(call.caller, query.limit, query.cursor)
    return Page(items=[RoomView.model_validate(row) for row in rows], next_cursor=next_cursor)


async def create_room(call: Call) -> RoomView:
    room = await call.runtime.rooms.create(call.caller, await call.body(CreateRoom))
    await call.services.changes.room_created(room.id, room.org_id)  # a room on every replica at once
    return RoomView.model_validate(room)


async def get_room(call: Call) -> RoomView:
    return RoomView.model_validate(await call.runtime.rooms.get(call.caller, call.param("room_id")))


async def update_room(call: Call) -> RoomView:
    body = await call.body(UpdateRoom)
    return RoomView.model_validate(await call.runtime.rooms.update(call.caller, call.param("room_id"), body))


async def list_participants(call: Call) -> Page[ParticipantView]:
    items = await call.runtime.rooms.participants(call.caller, call.param("room_id"))
    return Page(items=items, next_cursor=None)


async def add_participant(call: Call) -> ParticipantView:
    body = await call.body(AddParticipant)
    return await call.runtime.rooms.add_participant(call.caller, call.param("room_id"), body)


async def remove_participant(call: Call) -> Response:
    rooms = call.runtime.rooms
    await rooms.remove_participant(call.caller, call.param("room_id"), call.param("kind"), call.param("ref"))
    return Response(status_code=204)


async def post_message(call: Call) -> Response:
    room_id = call.param("room_id")
    sessions = call.services.security.sessions
    if sessions is not None:  # the room is the context: one session per (caller, room), as on A2A
        await sessions.touch(session_caller(call.caller), room_id)
    shown = await call.runtime.messages.post(call.caller, room_id, await call.body(PostMessage))
    return Response(orjson.dumps(shown), status_code=201, media_type="application/json")  # as its event


async def list_messages(call: Call) -> Response:
    window = call.query(Window)
    messages, room_id = call.runtime.messages, call.param("room_id")

    async def page() -> Any:
        rows, cut = await messages.messages(call.caller, room_id, window.since, window.limit, window.before)
        next_cursor = _next_cursor(window, len(rows), cut, rows[-1].seq if rows else None)
        items = [MessageView.model_validate(row) for row in rows]
        return Page(items=items, next_cursor=next_cursor).model_dump(mode="json")

    return await held_page(call.services.page_reads, call.caller, page)


def _next_cursor(window: Window, count: int, cut: bool, last: int | None) -> str | None:
    """The `since` of the next page: after a full page, or one the byte bound cut short; none after
    a `before` window (the caller moves `before` back itself)."""
    more = count == window.limit or cut
    return str(last) if more and last is not None and window.before is None else None


async def list_events(call: Call) -> Response:
    window = call.query(Window)
    messages, room_id = call.runtime.messages, call.param("room_id")

    async def page() -> Any:
        items, cut = await messages.events(call.caller, room_id, window.since, window.limit, window.before)
        next_cursor = _next_cursor(window, len(items), cut, items[-1]["cursor"] if items else None)
        views = [EventView.model_validate(item) for item in items]
        return Page(items=views, next_cursor=next_cursor).model_dump(mode="json")

    return await held_page(call.services.page_reads, call.caller, page)


async def get_part(call: Call) -> Response:
    """A file part's bytes (a view's file link): always a download, never a page of the hub's origin."""
    raw = call.param("index")
    index = int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 4 else -1  # 64 parts at most
    part = await call.runtime.messages.message_part(
        call.caller, call.param("room_id"), call.param("message_id"), index
    )
    media_type = part.get("mediaType") or "application/octet-stream"
    if MEDIA_TYPE.fullmatch(media_type) is None:  # an agent's answer is stored as it came
        media_type = "application/octet-stream"
    name = quote(part.get("filename") or f"part-{index}", safe="")
    headers = {
        "Content-Disposition": f"attachment; filename*=UTF-8''{name}",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox",
    }
    return Response(base64.b64decode(part["raw"]), media_type=media_type, headers=headers)


# -- executions ----------------------------------------------------------------------------------------


async def room_executions(call: Call) -> Page[ExecutionView]:
    rows = await call.runtime.executions.executions(call.caller, call.param("room_id"))
    return Page(items=[ExecutionView.model_validate(row) for row in rows], next_cursor=None)


async def get_execution(call: Call) -> ExecutionDetail:
    return await call.runtime.executions.detail(call.caller, call.param("execution_id"))


async def hand_off_execution(call: Call) -> ExecutionView:
    body = await call.body(HandOff)
    return ExecutionView.model_validate(
        await call.runtime.executions.hand_off(call.caller, call.param("execution_id"), body)
    )


async def execution_task(call: Call) -> dict[str, Any]:
    query = call.query(TaskQuery)
    task = await call.runtime.executions.task(call.caller, call.param("execution_id"), query.history_length)
    answer: dict[str, Any] = MessageToDict(task)
    return answer


async def cancel_execution(call: Call) -> ExecutionView:
    return ExecutionView.model_validate(
        await call.runtime.executions.cancel(call.caller, call.param("execution_id"))
    )


async def complete_execution(call: Call) -> ExecutionView:
    body = await call.body(CompleteExecution) if (await call.request.body()).strip() else CompleteExecution()
    return ExecutionView.model_validate(
        await call.runtime.executions.complete(call.caller, call.param("execution_id"), body.reason)
    )


# -- external agents' inbox ----------------------------------------------------------------------------


async def next_delivery(call: Call) -> DeliveryView | Response:
    if call.caller.kind != "agent":
        raise Forbidden("only an agent's key has an inbox")
    oldest = await pending(call.runtime.sessions, call.caller.id, limit=1)
    return oldest[0] if oldest else Response(status_code=204)


async def ack_delivery(call: Call) -> Response:
    await acknowledge(call.runtime.sessions, call.caller, call.param("delivery_id"))
    return Response(status_code=204)


OPERATIONS: list[Operation] = [
    Operation("GET", "/me", me, "Who the key belongs to", response=Me),
    Operation(
        "POST",
        "/organizations",
        create_org,
        "Create an organization and its owner (the superuser)",
        body=CreateOrg,
        response=NewOrganization,
        status=201,
        errors=(403, 409),
    ),
    Operation(
        "GET", "/organizations/current", current_org, "The caller's organization", response=OrganizationView
    ),
    Operation(
        "PATCH",
        "/organizations/current",
        update_org,
        "Change the organization (owner or admin)",
        body=UpdateOrg,
        response=OrganizationView,
        errors=(403,),
    ),
    Operation("GET", "/users", list_users, "The organization's users", response=Page[UserView]),
    Operation(
        "POST",
        "/users",
        create_user,
        "Create a user and its first key (owner or admin)",
        body=CreateUser,
        response=NewUser,
        status=201,
        errors=(403, 409),
    ),
    Operation(
        "GET", "/keys", list_keys, "The caller's keys (an owner or admin: all)", response=Page[KeyView]
    ),
    Operation(
        "POST",
        "/keys",
        create_key,
        "A new key for the caller, or (owner or admin) for a user or agent",
        body=CreateKey,
        response=NewKey,
        status=201,
        errors=(403, 404, 409),
    ),
    Operation(
        "POST",
        "/keys/{key_id}/revoke",
        revoke_key,
        "Revoke a key and the keys made with it, at once on every entry",
        response=KeyView,
        errors=(404,),
    ),
    Operation(
        "GET",
        "/agents",
        list_agents,
        "The agents and teams the organization can use, by skill, tag or mode if asked",
        query=Wanted,
        response=Page[AgentView],
    ),
    Operation(
        "POST",
        "/agents",
        create_agent,
        "Register an agent or team (owner or admin)",
        body=REGISTRATION,
        response=Registered | RegisteredExternal,
        status=201,
        errors=(403, 404, 409, 422),
    ),
    Operation(
        "POST",
        "/agents/import",
        import_catalog,
        "Register the A2A agents another domain's AI catalog publishes (owner or admin)",
        body=ImportCatalog,
        response=Imported,
        errors=(403, 422),
    ),
    Operation(
        "GET",
        "/agents/{agent_id}",
        get_agent,
        "One agent, with its card",
        response=AgentDetail,
        errors=(404,),
    ),
    Operation(
        "DELETE",
        "/agents/{agent_id}",
        delete_agent,
        "Remove an agent the organization registered (owner or admin)",
        status=204,
        errors=(403, 404),
    ),
    Operation(
        "GET",
        "/rooms",
        list_rooms,
        "The rooms the caller takes part in (owners and admins: all)",
        query=Listing,
        response=Page[RoomView],
    ),
    Operation(
        "POST",
        "/rooms",
        create_room,
        "Create a room; the creator joins as its owner",
        body=CreateRoom,
        response=RoomView,
        status=201,
        errors=(404, 409),
    ),
    Operation("GET", "/rooms/{room_id}", get_room, "One room", response=RoomView, errors=(404,)),
    Operation(
        "PATCH",
        "/rooms/{room_id}",
        update_room,
        "Change a room; archiving or closing it completes its executions",
        body=UpdateRoom,
        response=RoomView,
        errors=(404,),
    ),
    Operation(
        "GET",
        "/rooms/{room_id}/participants",
        list_participants,
        "The room's participants",
        response=Page[ParticipantView],
        errors=(404,),
    ),
    Operation(
        "POST",
        "/rooms/{room_id}/participants",
        add_participant,
        "Add a person, an agent or a team",
        body=AddParticipant,
        response=ParticipantView,
        status=201,
        errors=(404, 409),
    ),
    Operation(
        "DELETE",
        "/rooms/{room_id}/participants/{kind}/{ref}",
        remove_participant,
        "Remove a participant",
        status=204,
        errors=(404,),
    ),
    Operation(
        "POST",
        "/rooms/{room_id}/messages",
        post_message,
        "Post a message; it wakes the agents it mentions, else the default agent",
        body=PostMessage,
        response=MessageView,
        status=201,
        errors=(404, 409, 413, 415),
    ),
    Operation(
        "GET",
        "/rooms/{room_id}/messages",
        list_messages,
        "Messages after a cursor (or the newest before one), oldest first",
        query=Window,
        response=Page[MessageView],
        errors=(404, 503),
    ),
    Operation(
        "GET",
        "/rooms/{room_id}/events",
        list_events,
        "The room's events after a cursor (or the newest before one), oldest first",
        query=Window,
        response=Page[EventView],
        errors=(404, 503),
    ),
    Operation(
        "GET",
        "/rooms/{room_id}/messages/{message_id}/parts/{index}",
        get_part,
        "The bytes of a message's file part (a view's file link), as a download",
        response=bytes,
        errors=(404,),
    ),
    Operation(
        "GET",
        "/rooms/{room_id}/executions",
        room_executions,
        "The room's executions, newest first",
        response=Page[ExecutionView],
        errors=(404,),
    ),
    Operation(
        "GET",
        "/executions/{execution_id}",
        get_execution,
        "One execution, with the one it works for and those it handed work to",
        response=ExecutionDetail,
        errors=(404,),
    ),
    Operation(
        "GET",
        "/executions/{execution_id}/task",
        execution_task,
        "The execution as an A2A Task (JSON, as on the wire)",
        query=TaskQuery,
        response=dict[str, Any],
        errors=(404,),
    ),
    Operation(
        "POST",
        "/executions/{execution_id}/cancel",
        cancel_execution,
        "Cancel an execution",
        response=ExecutionView,
        errors=(404, 409),
    ),
    Operation(
        "POST",
        "/executions/{execution_id}/handoff",
        hand_off_execution,
        "Hand the execution's work to another agent of its room: it waits for that agent's child execution",
        body=HandOff,
        response=ExecutionView,
        errors=(403, 404, 409),
    ),
    Operation(
        "POST",
        "/executions/{execution_id}/complete",
        complete_execution,
        "Complete an execution (a room admin): its agent's next message starts a new one",
        body=CompleteExecution,
        response=ExecutionView,
        errors=(403, 404, 409),
    ),
    Operation(
        "GET",
        "/agent/messages/next",
        next_delivery,
        "An external agent's oldest unacknowledged delivery",
        response=DeliveryView,
        errors=(403,),
        empty="no delivery is waiting",
    ),
    Operation(
        "POST",
        "/agent/messages/{delivery_id}/ack",
        ack_delivery,
        "Acknowledge a delivery",
        status=204,
        errors=(404,),
    ),
    Operation(
        "GET",
        "/replay/configs",
        list_replay_configs,
        "The configs the server offers to replay turns on, by name (owner or admin)",
        response=ReplayConfigs,
        errors=(403,),
    ),
    Operation(
        "POST",
        "/replay",
        replay_turn,
        "Replay a stored team turn on an offered config: old and new routes (owner or admin)",
        body=ReplayRequest,
        response=dict[str, Any],
        errors=(403, 404, 422),
    ),
]
"""Every REST operation under /api/v1, in the order docs/api.md lists them."""


def routes(services: ApiServices) -> list[BaseRoute]:
    """Every REST route and the OpenAPI document (no key needed); the edge's guards (trace id, key, rate
    limit) ran before each, as on A2A. The WebSocket is `websockets`'."""

    async def serve_document(request: Request) -> Response:  # built on the first request, not at start
        return Response(openapi.served(tuple(OPERATIONS), PREFIX), media_type="application/json")

    served: list[BaseRoute] = [Route(o.path, endpoint(o, services), methods=[o.method]) for o in OPERATIONS]
    served.append(Route(openapi.PATH, serve_document, methods=["GET"]))
    return [Mount(PREFIX, routes=served)]  # one match for a request elsewhere, and only these for one here


def direct_routes(services: ApiServices) -> DirectRoutes:
    """The same operations, for the edge to serve without Starlette's router (api/direct.py)."""
    return DirectRoutes(OPERATIONS, services, PREFIX)


def websockets(services: ApiServices) -> dict[str, WebSocketEndpoint]:
    """The WebSocket endpoints by path, which the edge serves straight from ASGI (`EdgeApp`)."""
    return {f"{PREFIX}/ws": websocket_endpoint(services)}
