"""MCP servers as tool sources: stdio subprocesses or streamable HTTP, with the official `mcp` SDK (2.x).

One `McpServer` per configured server. Its connection lives in an owner task
inside the server's own task group, so the SDK's transport is entered and left
by the same task whatever task calls a tool; the connection is kept only once
the SDK's `Client` has connected, and is rebuilt on the next call after it broke.
The client speaks the stateless 2026-07-28 revision to a server that answers
`server/discover`, and falls back to the `initialize` handshake of the 2025
revisions otherwise. The tool list is read once and cached. Arguments are checked
against the tool's JSON schema before the call; a mismatch (like every failure of
the call itself) comes back as an error result for the model, not as an exception.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Any

import anyio
import httpx
import httpx2
import jsonschema
from anyio.abc import TaskGroup, TaskStatus
from mcp import MCPError, StdioServerParameters, types
from mcp.client import Client
from mcp.client.stdio import get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ranch.agents.llm.mcp_http import ViaHttpx
from ranch.config import HttpMcpServerConfig, StdioMcpServerConfig
from ranch.exceptions import ToolError

logger = logging.getLogger(__name__)


_CALL_FAILURES = (
    MCPError,
    OSError,
    httpx.HTTPError,
    httpx2.HTTPError,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
)
"""What a request on a live session raises when the server or the connection fails."""


class State(Enum):
    NEW = "new"  # built, not opened yet
    OPEN = "open"  # opened; connects on first use
    CLOSED = "closed"  # closed for good


@dataclass(frozen=True)
class ToolResult:
    """What a tool call gave back: text for the model, and the structured result when the tool has one
    (kept as a data part of the hop's history)."""

    text: str
    is_error: bool = False
    structured: dict[str, Any] | None = None


class McpServer:
    """One MCP server: cached tool list, validated calls, one shared session."""

    def __init__(
        self,
        config: StdioMcpServerConfig | HttpMcpServerConfig,
        http: Callable[..., httpx.AsyncClient] | None = None,
    ) -> None:
        self.config = config
        self._http = http or httpx.AsyncClient
        """Makes the HTTP client of a streamable-HTTP server (a tenant's: guarded connections)."""
        self.name = config.name
        self._state = State.NEW
        self._stack = AsyncExitStack()
        self._group: TaskGroup | None = None
        self._session: Client | None = None
        self._stop: anyio.Event | None = None
        self._connecting = anyio.Lock()
        self._tools: list[types.Tool] | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> McpServer:
        if self._state is not State.NEW:
            raise RuntimeError(f"MCP server '{self.name}' is {self._state.value}; it cannot be opened again")
        self._group = await self._stack.enter_async_context(anyio.create_task_group())
        self._state = State.OPEN
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._state is State.OPEN and self._group is not None:
            self._group.cancel_scope.cancel()
        self._state = State.CLOSED
        self._session = None
        await self._stack.aclose()

    @property
    def protocol_version(self) -> str | None:
        """The MCP revision the live connection speaks (`2026-07-28`, or a 2025 one after the
        `initialize` handshake); None while not connected."""
        return self._session.protocol_version if self._session is not None else None

    # -- tools --------------------------------------------------------------------------------

    async def list_tools(self) -> list[types.Tool]:
        """The server's tools, read once (every page) and cached; ToolError when it cannot be reached."""
        if self._tools is None:
            session = await self._connected()
            tools: list[types.Tool] = []
            cursor: str | None = None
            try:
                with anyio.fail_after(self.config.timeout):
                    while True:
                        page = await session.list_tools(cursor=cursor)
                        tools.extend(page.tools)
                        cursor = page.next_cursor
                        if not cursor:
                            break
            except (*_CALL_FAILURES, TimeoutError) as exc:
                self._drop()
                raise ToolError(f"MCP server '{self.name}': cannot list its tools: {_reason(exc)}") from exc
            self._tools = tools
        return self._tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Validate `arguments` against the tool's schema, then call it; failures become error results."""
        try:
            tool = next((t for t in await self.list_tools() if t.name == name), None)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        if tool is None:
            return ToolResult(f"MCP server '{self.name}' has no tool '{name}'", is_error=True)
        problem = schema_error(tool.input_schema, arguments)
        if problem is not None:
            return ToolResult(f"invalid arguments for tool '{name}': {problem}", is_error=True)
        try:
            session = await self._connected()
            result = await session.call_tool(name, arguments, read_timeout_seconds=self.config.timeout)
        except ToolError as exc:
            return ToolResult(str(exc), is_error=True)
        except _CALL_FAILURES as exc:
            self._drop()
            return ToolResult(
                f"tool '{name}' on MCP server '{self.name}' failed: {_reason(exc)}", is_error=True
            )
        return ToolResult(result_text(result), is_error=result.is_error, structured=result.structured_content)

    # -- the connection -----------------------------------------------------------------------

    async def _connected(self) -> Client:
        if self._state is not State.OPEN or self._group is None:
            raise RuntimeError(
                f"MCP server '{self.name}' is {self._state.value}; open it (async with) before use"
            )
        async with self._connecting:
            if self._session is None:
                try:
                    with anyio.fail_after(self.config.timeout):
                        self._session = await self._group.start(self._own)
                except Exception as exc:
                    raise ToolError(f"MCP server '{self.name}': cannot connect: {_reason(exc)}") from exc
        return self._session

    async def _own(self, *, task_status: TaskStatus[Client]) -> None:
        """The owner task: connect (discover, or initialise a 2025 server), hand the client out, hold it
        until told to stop. The SDK's response cache is off: the tool list is cached here."""
        stop = self._stop = anyio.Event()
        started = False
        try:
            async with Client(self._transport(), mode="auto", cache=None) as session:
                task_status.started(session)
                started = True
                await stop.wait()
        except Exception:  # a session that broke after it started: the next call reconnects
            if not started:
                raise
            logger.warning("MCP server '%s': connection lost", self.name, exc_info=True)
        finally:
            if started:
                self._session = None

    def _drop(self) -> None:
        """Forget a session that failed; its owner task exits and the next call reconnects."""
        self._session = None
        if self._stop is not None:
            self._stop.set()

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        config = self.config
        if isinstance(config, StdioMcpServerConfig):
            params = StdioServerParameters(
                command=config.command,
                args=config.args,
                env={**get_default_environment(), **config.env},  # not ranch's secrets
                cwd=config.cwd,
            )
            async with stdio_client(params) as (read, write):
                yield read, write
            return
        timeout = httpx.Timeout(config.timeout, read=max(config.timeout, 300.0))
        async with (
            self._http(headers=config.headers, timeout=timeout, follow_redirects=False) as http,
            httpx2.AsyncClient(
                transport=ViaHttpx(http), timeout=httpx2.Timeout(config.timeout, read=timeout.read)
            ) as sdk,
            streamable_http_client(config.url, http_client=sdk) as (read, write),
        ):
            yield read, write


def _reason(exc: BaseException) -> str:
    """The innermost message of a (possibly grouped) connection failure."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return str(exc) or type(exc).__name__


def schema_error(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Why `arguments` do not match `schema` (the most relevant error), or None when they do."""
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError:
        return None  # the server's schema is broken; let the server judge the arguments
    error = jsonschema.exceptions.best_match(validator_class(schema).iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{error.message}" + (f" (at '{where}')" if where else "")


def result_text(result: types.CallToolResult) -> str:
    """A tool result as text: its text blocks; structured content as JSON when there is no text."""
    texts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            texts.append(block.text)
        elif isinstance(block, types.EmbeddedResource) and isinstance(
            block.resource, types.TextResourceContents
        ):
            texts.append(block.resource.text)
        else:
            texts.append(f"[{block.type} content]")
    if not texts and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content))
    return "\n".join(texts)
