"""ranch's agents and teams as MCP tools, for any MCP client (an IDE, a desktop assistant).

Each served agent and team is a tool `ask_<id>(message, context_id?)` that runs
one turn and returns the final reply and the route it took (structured, and as
text). Passing the returned `context_id` again continues the conversation. The
same server runs over stdio (`ranch mcp CONFIG`) and over streamable HTTP at
`/mcp` on `ranch serve` (`mcp_routes`). Turns asked over MCP run directly, within
the agent's timeout; they are not stored as A2A tasks.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from a2a.types import (
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.json_format import MessageToDict
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope, Send

from ranch._version import __version__
from ranch.agents.base import Agent, AgentInfo, Call, gather_infos, text_of
from ranch.agents.fold import fold, state_name
from ranch.agents.invoke import invoke
from ranch.catalog.discovery import Wanted
from ranch.exceptions import RanchError
from ranch.identity.caller import Caller
from ranch.ids import new_id
from ranch.policy.limits import Limits, check_json, check_message
from ranch.wire import client_routing
from ranch.wire.events import INTERRUPTED, TERMINAL
from ranch.wire.fastpath import replay
from ranch.wire.jsonrpc import parse_error

if TYPE_CHECKING:
    from ranch.catalog.registry import Registry
    from ranch.hub.app import Hub

PREFIX = "ask_"


def tool_name(agent_id: str) -> str:
    """`ask_<id>`; an organization's agent `acme.helper` is `ask_acme__helper` (clients such as model
    APIs accept only letters, digits, `_` and `-` in tool names)."""
    return PREFIX + agent_id.replace(".", "__")


MCP_PATH = "/mcp"

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": {"type": "string", "description": "what to ask"},
        "context_id": {
            "type": "string",
            "description": "continue an earlier conversation: the context_id a previous answer returned",
        },
    },
    "required": ["message"],
    "additionalProperties": False,
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "reply": {"type": "string"},
        "state": {
            "type": "string",
            "enum": ["completed", "input-required", "failed", "canceled", "rejected"],
        },
        "context_id": {"type": "string"},
        "route": {"type": "array", "items": {"type": "string"}},
        "trail": {"type": "array", "items": {"type": "object"}},
    },
    "required": ["reply", "state", "context_id", "route"],
}


Reachable = Callable[[Any, str], Awaitable[bool]]
"""(the HTTP request or None, agent id) -> whether the caller may ask that agent."""


async def _everyone(request: Any, agent_id: str) -> bool:
    return True


def build_server(
    registry: Registry, reachable: Reachable = _everyone, limits: Limits | None = None
) -> Server[Any, Any]:
    """The MCP server: one `ask_<id>` tool per agent and team of `registry` the caller may reach."""
    server: Server[Any, Any] = Server("ranch", version=__version__)

    async def tools() -> list[Agent]:
        request = server.request_context.request if reachable is not _everyone else None
        return [agent for agent in _askable(registry) if await reachable(request, agent.id)]

    async def list_tools() -> list[types.Tool]:
        """Every reachable agent's tool; over HTTP, `/mcp?skill=&tag=&mode=` lists only those that
        match (catalog/discovery.py; a bad filter is an error naming it); every reachable tool stays
        callable."""
        agents = await tools()
        infos = await gather_infos(agents)
        wanted = _wanted(server)
        return [_tool(agent, info) for agent, info in zip(agents, infos, strict=True) if wanted.matches(info)]

    async def call_tool(
        name: str, arguments: dict[str, Any]
    ) -> tuple[list[types.ContentBlock], dict[str, Any]]:
        allowed = {tool_name(agent.id): agent.id for agent in await tools()}
        agent_id = allowed.get(name)
        if agent_id is None:
            raise ValueError(f"no tool '{name}'; the tools are {', '.join(allowed)}")
        text, context_id = arguments.get("message"), arguments.get("context_id")
        if not isinstance(text, str) or not (context_id is None or isinstance(context_id, str)):
            raise ValueError("message must be a string, and context_id a string when given")
        try:  # the same limits as every A2A entry; the client gets the error as the tool's result
            check_message(_message(text, context_id), limits or Limits(), "message")
        except RanchError as exc:
            raise ValueError(str(exc)) from exc
        answer = await ask(
            registry.get(agent_id), text, context_id, _owner(server, agent_id), _caller(server)
        )
        text = answer["reply"] + "\n\nroute: " + " -> ".join(answer["route"])
        return [types.TextContent(type="text", text=text)], answer

    # the SDK's low-level decorators carry no annotations; the handlers themselves are typed
    server.list_tools()(list_tools)  # type: ignore[no-untyped-call]
    server.call_tool()(call_tool)
    return server


def _wanted(server: Server[Any, Any]) -> Wanted:
    """The discovery filters of the HTTP request behind this MCP call (none over stdio)."""
    request = server.request_context.request
    query = getattr(request, "query_params", None)
    if query is None:
        return Wanted()
    try:
        return Wanted.from_query(query)
    except RanchError as exc:
        raise ValueError(str(exc)) from exc


def _message(text: str, context_id: str | None) -> Message:
    return Message(
        message_id=new_id(), role=Role.ROLE_USER, context_id=context_id or new_id(), parts=[Part(text=text)]
    )


def _owner(server: Server[Any, Any], agent_id: str) -> str:
    """The conversation's owner, as on the A2A bindings (`agent/principal`): with a key, a caller's
    context_id continues only its own conversations."""
    request = getattr(server.request_context, "request", None)  # None over stdio
    user = request.scope.get("user") if request is not None else None
    name = user.display_name if user is not None and user.is_authenticated else ""
    return f"{agent_id}/{name}"


def _caller(server: Server[Any, Any]) -> Caller | None:
    """The key's principal, as a team's routing sees the caller (None over stdio, or without a key)."""
    from ranch.identity.principal import PRINCIPAL_KEY, caller_of

    request = getattr(server.request_context, "request", None)
    principal = request.scope.get(PRINCIPAL_KEY) if request is not None else None
    return caller_of(principal) if principal is not None else None


async def ask(
    agent: Agent, text: str, context_id: str | None = None, owner: str = "", caller: Caller | None = None
) -> dict[str, Any]:
    """Run one turn of `agent` and describe its outcome: reply, state, context_id, route, trail."""
    message = _message(text, context_id)
    task = Task(id=new_id(), context_id=message.context_id, status=TaskStatus())
    try:
        async with invoke(agent, message, Call(owner=owner, caller=caller)) as events:
            folded = await fold(events, agent.id)
        if folded.message is not None:
            task.status.CopyFrom(TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=folded.message))
        elif folded.task is not None:
            task.status.CopyFrom(folded.task.status)
            task.artifacts.extend(folded.task.artifacts)
            task.metadata.CopyFrom(folded.task.metadata)
    except RanchError as exc:
        _fail(task, str(exc))
    return _answer(agent.id, message.context_id, task)


def _fail(task: Task, text: str) -> None:
    message = Message(message_id=new_id(), role=Role.ROLE_AGENT, parts=[Part(text=text)])
    task.status.CopyFrom(TaskStatus(state=TaskState.TASK_STATE_FAILED, message=message))


def _answer(agent_id: str, context_id: str, task: Task) -> dict[str, Any]:
    state = task.status.state
    if state not in TERMINAL and state not in INTERRUPTED:
        _fail(task, f"agent '{agent_id}' stopped before its turn ended")
    reply = text_of(task.status.message) if task.status.HasField("message") else ""
    if not reply:
        reply = "\n".join(text_of(Message(parts=a.parts)) for a in task.artifacts)
    data = MessageToDict(task.metadata).get(client_routing.URI, {})
    trail = list(data.get("trail", [])) if isinstance(data, dict) else []
    if trail:
        route = ["user", *(str(hop["agent"]) for hop in trail), str(trail[-1]["recipient"])]
    else:
        decision = (
            client_routing.read_decision(task.status.message) if task.status.HasField("message") else None
        )
        route = ["user", agent_id, decision.recipient if decision is not None else "user"]
    name = state_name(task.status.state)
    return {"reply": reply, "state": name, "context_id": context_id, "route": route, "trail": trail}


def _askable(registry: Registry) -> list[Agent]:
    """Agents a caller may ask; one that requires an extension cannot be asked over MCP."""
    return [agent for agent in registry if not agent.require_extensions]


def _tool(agent: Agent, info: AgentInfo) -> types.Tool:
    about = info.description or info.name
    return types.Tool(
        name=tool_name(agent.id),
        title=info.name,
        description=f"Ask {info.name} ({agent.id}): {about}. Returns its reply and the route the turn took.",
        inputSchema=INPUT_SCHEMA,
        outputSchema=OUTPUT_SCHEMA,
    )


# -- streamable HTTP at /mcp on `ranch serve` ---------------------------------------------------


class _Endpoint:
    """The ASGI endpoint of `/mcp`: every request goes to the session manager, once its body parses.

    The edge's guards (key, failed-auth limit, rate limit, body limit) have run before it.
    """

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] == "POST":
            replayed = await _parsable(scope, receive, send)
            if replayed is None:
                return
            receive = replayed
        await self.manager.handle_request(scope, receive, send)


async def _parsable(scope: Scope, receive: Receive, send: Send) -> Receive | None:
    """The body's `receive` again, once the body is JSON the MCP SDK can parse; else None, having
    answered a JSON-RPC parse error with 400 (the SDK answers invalid UTF-8 and deep nesting with 500)."""
    body = await Request(scope, receive).body()
    try:
        check_json(body)
    except ValueError as exc:
        await Response(parse_error(exc), 400, media_type="application/json")(scope, receive, send)
        return None
    return replay(body, receive)


def mcp_routes(hub: Hub) -> list[BaseRoute]:
    """The `/mcp` route; the session manager it needs joins the hub's lifespan (`hub.services`)."""
    from ranch.identity.principal import PRINCIPAL_KEY

    security = hub.security

    async def reachable(request: Any, agent_id: str) -> bool:
        principal = request.scope.get(PRINCIPAL_KEY) if request is not None else None
        return await security.reachable(principal, agent_id)

    server = build_server(hub.registry, reachable if security.enabled else _everyone, hub.settings.limits())
    manager = StreamableHTTPSessionManager(app=server, stateless=True)

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with manager.run():
            yield

    hub.services.append(running)
    return [Route(MCP_PATH, endpoint=_Endpoint(manager))]
