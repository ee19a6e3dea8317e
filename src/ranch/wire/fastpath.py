"""The shortest road for the commonest request: an A2A 1.0 JSON-RPC call to a known agent.

Starlette's middleware stack and router cost about a quarter of a SendMessage to an
echo agent (bench/README.md). `FastPathApp` sends a POST to `/a2a/agents/{id}` with
`A2A-Version: 1.x`, a Content-Length within the limit and no `A2A-Extensions`
straight to the JSON-RPC endpoint; everything else (unknown agents, 0.3, extension
negotiation, oversized or chunked bodies) takes the full stack, which answers it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Container
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

PREFIX = "/a2a/agents/"


class FastPathApp(Starlette):
    """A Starlette app whose plain A2A 1.0 JSON-RPC calls skip the middleware stack and router."""

    def __init__(
        self,
        *,
        endpoint: Callable[[Request], Awaitable[Response]],
        agents: Container[str],
        max_body: int,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._endpoint = endpoint
        self._agents = agents
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        agent_id = self._fast_agent(scope)
        if agent_id is None:
            await super().__call__(scope, receive, send)
            return
        scope["app"] = self
        scope["path_params"] = {"agent_id": agent_id}
        response = await self._endpoint(Request(scope, receive))
        await response(scope, receive, send)

    def _fast_agent(self, scope: Scope) -> str | None:
        if scope["type"] != "http" or scope["method"] != "POST" or not scope["path"].startswith(PREFIX):
            return None
        agent_id = scope["path"][len(PREFIX) :].removesuffix("/")
        if not agent_id or "/" in agent_id or agent_id not in self._agents:
            return None
        version = length = None
        for name, value in scope["headers"]:
            if name == b"a2a-version":
                version = value
            elif name == b"content-length":
                length = value
            elif name == b"a2a-extensions":
                return None  # the full stack echoes activated extensions
        if version is None or not version.startswith(b"1") or length is None or not length.isdigit():
            return None
        return agent_id if int(length) <= self._max_body else None
