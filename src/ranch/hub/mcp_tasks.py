"""The MCP Tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28) over ranch's A2A tasks.

A client that declares the extension in a request's capabilities and calls an `ask_<id>` tool whose
turn runs as a task (a team, an llm or remote agent; not one that answers at once) gets a task handle
(`resultType: "task"`) at once, and the turn runs as an A2A task in the hub's task engine: the same
task `SendMessage` with `returnImmediately` starts, owned by the same caller. `tasks/get` reads it and,
once it ends, carries the tool's result; `tasks/cancel` cancels it. The task lives in the shared task
store, so any replica answers any of these requests. The extension has no `tasks/list` (a caller can
only reach the ids it was given) and ranch asks nothing of the client mid-task, so no `tasks/update`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from a2a.types import Message, Task, TaskState
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from google.protobuf.json_format import MessageToDict
from mcp import MCPError, types
from mcp.server import Server, ServerRequestContext
from mcp.types import INVALID_PARAMS
from mcp_types import ClientCapabilities, RequestParams
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ConfigDict, ValidationError

from ranch.agents.base import Agent, Call
from ranch.identity.caller import Caller
from ranch.wire.events import INTERRUPTED, TERMINAL

if TYPE_CHECKING:
    from ranch.tasks.engine import TaskEngine

EXTENSION = "io.modelcontextprotocol/tasks"
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
POLL_INTERVAL_MS = 500
"""What a client is told to wait between two `tasks/get`: a team hop takes about that long."""
CREATED_KEY = "ranch/mcpTaskCreatedAt"
"""Metadata key of the task's first message: when the MCP task was created (A2A tasks keep no such
time, and `createdAt` must not change between replicas)."""

Answer = Callable[[str, str, Task], dict[str, Any]]
"""(agent id, context id, A2A task) -> the tool's structured answer (hub/mcp.py `_answer`)."""
Owned = Callable[[Any, str], Awaitable[bool]]
"""(HTTP request, owner of a task) -> whether this caller owns it (its key, an agent it may reach)."""


class _Params(RequestParams):
    """Any params: the handlers check them, so that an error names the field (the SDK's does not)."""

    model_config = ConfigDict(extra="allow")


class TaskParams(RequestParams):
    """`tasks/get` and `tasks/cancel` params."""

    task_id: str


def _task_id(params: _Params) -> str:
    try:
        return TaskParams.model_validate(params.model_dump(by_alias=True)).task_id
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"])
        raise MCPError(INVALID_PARAMS, f"params.{where}: {error['msg']}") from exc


def declared(ctx: ServerRequestContext[Any, Any]) -> bool:
    """Whether this request's client declared the extension, on a revision that can carry a task."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False  # a 2025 client's `task` field asks for the core tasks of 2025-11-25, not served
    capabilities = ctx.session.client_capabilities
    return capabilities is not None and EXTENSION in (capabilities.extensions or {})


def _require(ctx: ServerRequestContext[Any, Any]) -> None:
    """The extension's methods refuse a request that does not declare it (-32021, as the spec says)."""
    if not declared(ctx):
        required = ClientCapabilities(extensions={EXTENSION: {}})
        raise MCPError(
            MISSING_REQUIRED_CLIENT_CAPABILITY,
            f"Missing required client capability: declare the {EXTENSION} extension",
            data={"requiredCapabilities": required.model_dump(by_alias=True, exclude_none=True)},
        )


class McpTasks:
    """Starts, reads and cancels the A2A tasks behind MCP tasks (see the module)."""

    def __init__(self, core: Callable[[], TaskEngine], answer: Answer, owned: Owned, ttl_ms: int | None):
        self._core = core
        self._answer = answer
        self._owned = owned
        self.ttl_ms = ttl_ms
        """`ttlMs`: how long ranch keeps a finished task (`retention.tasks`); None, kept for ever."""

    def offer(self, server: Server[Any]) -> None:
        """Advertise the extension and serve its methods on `server`."""
        server.extensions[EXTENSION] = {}
        server.add_request_handler("tasks/get", _Params, self.get)
        server.add_request_handler("tasks/cancel", _Params, self.cancel)

    async def create(
        self, agent: Agent, message: Message, owner: str, caller: Caller | None
    ) -> dict[str, Any]:
        """Start the turn as an A2A task (stored before this returns) and answer with its handle."""
        message.metadata.update({CREATED_KEY: _now()})
        core = self._core()
        call = Call(owner=owner, caller=caller, resumable=True)
        run = await core.start(agent, message, call, owner, submit=True)
        task = await core.get(run.task_id, run.owner)
        return {"resultType": "task", **self._task(task, agent.id)}

    async def get(self, ctx: ServerRequestContext[Any, Any], params: _Params) -> dict[str, Any]:
        _require(ctx)
        task, owner = await self._find(ctx.request, _task_id(params))
        return self._task(task, owner.partition("/")[0])

    async def cancel(self, ctx: ServerRequestContext[Any, Any], params: _Params) -> dict[str, Any]:
        """Cancel the hop in flight and record the A2A task CANCELED; a task that already ended is
        acknowledged too (the spec's cancellation is a request, which the end may have overtaken)."""
        _require(ctx)
        task, owner = await self._find(ctx.request, _task_id(params))
        if task.status.state not in TERMINAL:
            try:
                await self._core().cancel(task.id, owner)
            except TaskNotCancelableError:
                pass  # it ended meanwhile
        return {}

    async def _find(self, request: Any, task_id: str) -> tuple[Task, str]:
        """The task and its owner when this caller owns it; any other id is not found (-32602), so a
        caller cannot tell another's task from none."""
        core = self._core()
        owner = await core.owner_of(task_id) if task_id else None
        if owner is not None and await self._owned(request, owner):
            try:
                return await core.get(task_id, owner), owner
            except TaskNotFoundError:
                pass
        raise MCPError(INVALID_PARAMS, f"params.taskId: Failed to retrieve task: no task '{task_id}'")

    def _task(self, task: Task, agent_id: str) -> dict[str, Any]:
        """The MCP task of an A2A task; once it ends, with the tool's result (`DetailedTask`)."""
        state = task.status.state
        updated = task.status.timestamp.ToJsonString() if task.status.HasField("timestamp") else _now()
        first = MessageToDict(task.history[0].metadata) if task.history else {}
        shown: dict[str, Any] = {
            "taskId": task.id,
            "status": "working",
            "createdAt": str(first.get(CREATED_KEY, updated)),
            "lastUpdatedAt": updated,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": POLL_INTERVAL_MS,
        }
        if state == TaskState.TASK_STATE_CANCELED:
            shown["status"] = "cancelled"
        elif state in TERMINAL or state in INTERRUPTED:
            # The turn answered: the tool's result, a failed or input-required turn included (the
            # spec keeps `failed` for JSON-RPC errors; a direct call answers those turns too).
            answer = self._answer(agent_id, task.context_id, task)
            shown["status"] = "completed"
            shown["result"] = tool_result(answer).model_dump(by_alias=True, mode="json", exclude_none=True)
        return shown


def tool_result(answer: dict[str, Any]) -> types.CallToolResult:
    """The `tools/call` result of a turn's answer: the reply and the route as text, and structured."""
    text = answer["reply"] + "\n\nroute: " + " -> ".join(answer["route"])
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=answer
    )


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")
