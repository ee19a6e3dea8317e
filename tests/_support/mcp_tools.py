"""An MCP server written with the official SDK (FastMCP), for tests.

Run as a script it serves over stdio (`python tests/_support/mcp_tools.py`); `http_app()`
is the same server over streamable HTTP, for a ServerThread on 127.0.0.1.
"""

from __future__ import annotations

import os

from mcp.server.fastmcp import FastMCP
from starlette.applications import Starlette

CALLS: list[tuple[str, dict[str, object]]] = []
"""Calls the in-process (HTTP) server received."""


def build() -> FastMCP:
    server = FastMCP("ranch-test-tools", host="127.0.0.1")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        CALLS.append(("add", {"a": a, "b": b}))
        return a + b

    @server.tool()
    def shout(text: str) -> str:
        """The text in capitals."""
        CALLS.append(("shout", {"text": text}))
        return text.upper()

    @server.tool()
    def whoami() -> str:
        """Which process answers (tells a subprocess from the test process)."""
        return f"pid {os.getpid()}"

    return server


def http_app() -> Starlette:
    return build().streamable_http_app()


if __name__ == "__main__":
    build().run("stdio")
