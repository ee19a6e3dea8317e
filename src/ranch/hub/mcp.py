"""ranch's agents and teams as MCP tools, for any MCP client (an IDE, a desktop assistant).

Each served agent and team is a tool `ask_<id>(message, context_id?)` that runs
one turn and returns the final reply and the route it took (structured, and as
text). Passing the returned `context_id` again continues the conversation. The
same server runs over stdio (`ranch mcp CONFIG`) and over streamable HTTP at
`/mcp` on `ranch serve` (`mcp_routes`), on the mcp 2.x SDK: it speaks the
stateless 2026-07-28 revision (`server/discover`, every request on its own) and
still serves 2025-era clients, whose `initialize` handshake it answers without
opening a session. Nothing is kept between requests, so any replica answers any
request. A turn asked over MCP runs directly, within the agent's timeout, unless the client declares
the Tasks extension on `/mcp`: then a turn that runs as a task is started as a stored A2A task and
answered with its handle (hub/mcp_tasks.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any

import jsonschema
from a2a.types import (
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.json_format import MessageToDict
from mcp import MCPError, types
from mcp.server import Server, ServerRequestContext
from mcp.server.context import CallNext, HandlerResult
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.types import INVALID_PARAMS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ranch._version import __version__
from ranch.agents.base import Agent, AgentInfo, Call, gather_infos, text_of
from ranch.agents.fold import fold, state_name
from ranch.agents.invoke import invoke
from ranch.catalog.discovery import Wanted
from ranch.exceptions import RanchError
from ranch.hub.mcp_tasks import McpTasks, declared, tool_result
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


INSTRUCTIONS = (
    "Each tool ask_<id> asks one of ranch's agents or teams: it runs one turn and returns the reply "
    "and the route the turn took. Pass the context_id an answer returned to continue that conversation."
)
"""What `server/discover` (or `initialize`) tells a client about the server, beside its tools."""

Reachable = Callable[[Any, str], Awaitable[bool]]
"""(the HTTP request or None, agent id) -> whether the caller may ask that agent."""

LIST_TTL_MS = 5_000
"""How long a client may reuse a tool list (2026-07-28 `ttlMs`): agents come and go on any replica."""
CATALOG_KEY = "ranch/catalog"
"""`_meta` key of a tool list: a digest of the tools listed, the same on every replica serving the same
catalog, so a client can tell a changed list from a repeated one."""
_ARGUMENTS = jsonschema.Draft202012Validator(INPUT_SCHEMA)
_FIELDS = {"message.parts[0].text": "message", "message.contextId": "context_id", "message": "message"}
"""Where the A2A limits name a part of the message an MCP caller sent as an argument."""


async def _everyone(request: Any, agent_id: str) -> bool:
    return True


def build_server(
    registry: Registry,
    reachable: Reachable = _everyone,
    limits: Limits | None = None,
    tasks: McpTasks | None = None,
) -> Server[Any]:
    """The MCP server: one `ask_<id>` tool per agent and team of `registry` the caller may reach.

    It keeps nothing between requests (the HTTP request of each call is in `ctx.request`; None over
    stdio), so any replica answers any request of a 2026-07-28 or a 2025 client. With `tasks` (on
    `/mcp`, where the task store is), it offers the Tasks extension."""

    async def tools(request: Any) -> list[Agent]:
        return [agent for agent in _askable(registry) if await reachable(request, agent.id)]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        """Every reachable agent's tool; over HTTP, `/mcp?skill=&tag=&mode=` lists only those that
        match (catalog/discovery.py; a bad filter is an error naming it); every reachable tool stays
        callable."""
        agents = await tools(ctx.request)
        infos = await gather_infos(agents)
        wanted = _wanted(ctx.request)
        listed = [
            _tool(agent, info) for agent, info in zip(agents, infos, strict=True) if wanted.matches(info)
        ]
        return types.ListToolsResult(
            tools=listed, ttl_ms=LIST_TTL_MS, cache_scope="private", _meta={CATALOG_KEY: _digest(listed)}
        )

    async def accepted(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | tuple[Agent, str, str | None]:
        """The agent, message and context_id asked; bad input is the tool's error result naming the
        field, which a model reads."""
        allowed = {tool_name(agent.id): agent.id for agent in await tools(ctx.request)}
        agent_id = allowed.get(params.name)
        if agent_id is None:
            return _error(f"name: no tool '{params.name}'; the tools are {', '.join(allowed)}")
        arguments = params.arguments or {}
        problem = _arguments_problem(arguments)
        if problem is not None:
            return _error(problem)
        text, context_id = arguments["message"], arguments.get("context_id")
        try:  # the same limits as every A2A entry
            check_message(_message(text, context_id), limits or Limits(), "message")
        except RanchError as exc:
            return _error(_argument_named(str(exc)))
        return registry.get(agent_id), text, context_id

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        """Ask the agent and answer when its turn ends."""
        asked = await accepted(ctx, params)
        if isinstance(asked, types.CallToolResult):
            return asked
        agent, text, context_id = asked
        request = ctx.request
        return tool_result(await ask(agent, text, context_id, _owner(request, agent.id), _caller(request)))

    async def call_tool_or_task(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> HandlerResult:
        """A client declaring the Tasks extension gets a task for a turn that runs as one."""
        asked = await accepted(ctx, params)
        if isinstance(asked, types.CallToolResult):
            return asked
        agent, text, context_id = asked
        request = ctx.request
        owner, caller = _owner(request, agent.id), _caller(request)
        if tasks is None or agent.replies_directly or not declared(ctx):
            return tool_result(await ask(agent, text, context_id, owner, caller))
        try:
            return await tasks.create(agent, _message(text, context_id), owner, caller)
        except RanchError as exc:
            return _error(str(exc))

    server: Server[Any] = Server(
        "ranch",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )
    server.middleware.append(_fields_named)
    if tasks is not None:
        server.add_request_handler("tools/call", types.CallToolRequestParams, call_tool_or_task)
        tasks.offer(server)
    return server


async def _fields_named(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """A malformed request's -32602 names the field (the SDK's says only "Invalid request parameters")."""
    try:
        return await call_next(ctx)
    except ValidationError as exc:
        error = exc.errors()[0]
        if error["loc"][:1] != ("params",):  # not the request's: a result the SDK refused
            raise
        raise MCPError(INVALID_PARAMS, f"{_path(error['loc'])}: {error['msg']}") from exc


def _path(loc: tuple[int | str, ...]) -> str:
    """`params._meta["io.modelcontextprotocol/clientCapabilities"]`, `params.arguments`."""
    where = ""
    for part in loc:
        if isinstance(part, int):
            where += f"[{part}]"
        elif part.replace("_", "a").isalnum():
            where += f".{part}" if where else part
        else:
            where += f'["{part}"]'
    return where


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _arguments_problem(arguments: dict[str, Any]) -> str | None:
    """What is wrong with a call's arguments, naming the argument (the SDK no longer checks them)."""
    error = jsonschema.exceptions.best_match(_ARGUMENTS.iter_errors(arguments))
    if error is None:
        return None
    where = ".".join(["arguments", *(str(part) for part in error.absolute_path)])
    if error.validator == "required":
        missing = error.message.split("'")[1]
        return f"arguments.{missing}: is required"
    if error.validator == "additionalProperties":
        unknown = sorted(set(arguments) - set(INPUT_SCHEMA["properties"]))[0]
        return f"arguments.{unknown}: is not an argument of this tool (it takes message and context_id)"
    return f"{where}: {error.message}"


def _argument_named(text: str) -> str:
    """An A2A limit's error naming the MCP argument (`message.contextId` -> `arguments.context_id`)."""
    for field, argument in _FIELDS.items():
        if text.startswith(field + " ") or text.startswith(field + ":"):
            return f"arguments.{argument}{text[len(field) :]}"
    return text


def _digest(tools: list[types.Tool]) -> str:
    dumped = json.dumps([tool.model_dump(mode="json", by_alias=True) for tool in tools], sort_keys=True)
    return hashlib.sha256(dumped.encode()).hexdigest()[:16]


def _wanted(request: Any) -> Wanted:
    """The discovery filters of the HTTP request behind this MCP call (none over stdio); a bad one is
    the request's error (-32602), naming the filter."""
    query = getattr(request, "query_params", None)
    if query is None:
        return Wanted()
    try:
        return Wanted.from_query(query)
    except RanchError as exc:
        raise MCPError(INVALID_PARAMS, str(exc)) from exc


def _message(text: str, context_id: str | None) -> Message:
    return Message(
        message_id=new_id(), role=Role.ROLE_USER, context_id=context_id or new_id(), parts=[Part(text=text)]
    )


def _owner(request: Any, agent_id: str) -> str:
    """The conversation's owner, as on the A2A bindings (`agent/principal`): with a key, a caller's
    context_id continues only its own conversations (the request is None over stdio)."""
    user = request.scope.get("user") if request is not None else None
    name = user.display_name if user is not None and user.is_authenticated else ""
    return f"{agent_id}/{name}"


def _caller(request: Any) -> Caller | None:
    """The key's principal, as a team's routing sees the caller (None over stdio, or without a key)."""
    from ranch.identity.principal import PRINCIPAL_KEY, caller_of

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
        input_schema=INPUT_SCHEMA,
        output_schema=OUTPUT_SCHEMA,
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


def mcp_app(hub: Hub) -> tuple[ASGIApp, Callable[[], AbstractAsyncContextManager[None]]]:
    """The `/mcp` endpoint and the context its session manager runs in (for as long as the hub)."""
    from ranch.identity.principal import PRINCIPAL_KEY

    security = hub.security

    async def reachable(request: Any, agent_id: str) -> bool:
        principal = request.scope.get(PRINCIPAL_KEY) if request is not None else None
        return await security.reachable(principal, agent_id)

    reach = reachable if security.enabled else _everyone

    async def owned(request: Any, owner: str) -> bool:
        """Whether `owner` (of an A2A task) is this caller asking an agent it may still reach."""
        agent_id = owner.partition("/")[0]
        if owner != _owner(request, agent_id) or agent_id not in hub.registry:
            return False
        return not hub.registry.get(agent_id).require_extensions and await reach(request, agent_id)

    retention = hub.settings.retention or hub.config.retention
    ttl_ms = None if retention.tasks is None else int(retention.tasks * 1000)
    tasks = McpTasks(lambda: hub.core, _answer, owned, ttl_ms)
    server = build_server(hub.registry, reach, hub.settings.limits(), tasks)
    manager = StreamableHTTPSessionManager(app=server, stateless=True)

    @asynccontextmanager
    async def running() -> AsyncIterator[None]:
        async with manager.run():
            yield

    return _Endpoint(manager), running
