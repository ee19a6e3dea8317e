"""`/mcp`, built on its first request: the MCP SDK is a quarter of a server's import time, and most
servers (and every test server) never receive an MCP call.

The first request imports `ranch.hub.mcp` in a worker thread (`ranch.utils.imports`), builds the
server, and starts its session manager in the hub's task group (`Hub.group`), where it runs until the
hub stops; every request then goes to it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskStatus
from starlette.types import ASGIApp, Receive, Scope, Send

from ranch.utils.imports import imported

if TYPE_CHECKING:
    from ranch.hub.app import Hub

MCP_PATH = "/mcp"


class LazyMcp:
    """The ASGI endpoint of `/mcp` (see the module)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self._app: ASGIApp | None = None
        self._building: anyio.Lock | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app or await self._build()
        await app(scope, receive, send)

    async def _build(self) -> ASGIApp:
        self._building = self._building or anyio.Lock()
        async with self._building:  # requests arriving together build it once
            if self._app is None:
                await imported("ranch.hub.mcp")  # off the event loop (ranch.utils.imports)
                from ranch.hub.mcp import mcp_app

                endpoint, running = mcp_app(self.hub)
                await self.hub.group.start(_run, running)
                self._app = endpoint
        return self._app


async def _run(
    running: Callable[[], AbstractAsyncContextManager[None]],
    *,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """The session manager's context, entered and left in this one task of the hub's group."""
    async with running():
        task_status.started()
        await anyio.sleep_forever()
