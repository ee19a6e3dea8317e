"""An MCP server written with the official SDK, for tests: `MCPServer` on mcp 2.x, `FastMCP` on 1.x.

In the test process (mcp 2.x) `http_app()` serves it over streamable HTTP for a ServerThread on
127.0.0.1, statelessly. Run as a script it serves over stdio (`python tests/_support/mcp_tools.py`),
or over streamable HTTP on 127.0.0.1 with a session per client (`... http PORT`); with the mcp 1.x
venv's python (`make mcp1`) that is a 2025-era server, the kind ranch's llm agents still talk to.
"""

from __future__ import annotations

import os
import sys
from typing import Any

try:
    from mcp.server import MCPServer

    V1 = False
except ImportError:
    from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[attr-defined,no-redef,unused-ignore]

    V1 = True

CALLS: list[tuple[str, dict[str, object]]] = []
"""Calls the in-process (HTTP) server received."""


def build() -> Any:
    server = MCPServer("ranch-test-tools")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers (a structured result: {"result": a + b})."""
        CALLS.append(("add", {"a": a, "b": b}))
        return a + b

    @server.tool()
    def shout(text: str) -> str:
        """The text in capitals."""
        CALLS.append(("shout", {"text": text}))
        return text.upper()

    @server.tool()
    def whoami() -> str:
        """Which process and SDK answer (tells a subprocess from the test process, 1.x from 2.x)."""
        from importlib.metadata import version

        return f"pid {os.getpid()} mcp {version('mcp')}"

    return server


def http_app() -> Any:
    """The server as a Starlette app serving `/mcp`, statelessly."""
    server = build()
    if V1:  # the transport's settings lived on the server
        server.settings.stateless_http = True
        return server.streamable_http_app()
    return server.streamable_http_app(stateless_http=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        import uvicorn

        # the SDK's default, with a session per client: what most deployed servers run
        app = build().streamable_http_app()
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        build().run("stdio")
