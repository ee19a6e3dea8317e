"""`ranch mcp [CONFIG]`: every agent and team as an MCP tool over stdio, for IDEs and desktop assistants.

stdout carries the MCP protocol, so everything else goes to stderr: logs as JSON lines,
scrubbed like `ranch serve`'s (docs/policies.md, Logs).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from ranch.catalog.registry import Registry
from ranch.cli.demo import demo_config
from ranch.config import load_config
from ranch.hub.mcp import build_server
from ranch.policy.logs import configure_logging
from ranch.wire.client import ClientPool


def register(commands: Any) -> None:
    parser = commands.add_parser("mcp", help="serve every agent and team as MCP tools over stdio")
    parser.add_argument("config", nargs="?", help="YAML config; omit for the built-in demo team")
    parser.add_argument(
        "--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"]
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    configure_logging(level=args.log_level, stream=sys.stderr)  # stdout is the protocol
    config = load_config(args.config) if args.config else demo_config()
    anyio.run(serve, Registry(config, ClientPool()))
    return 0


async def serve(registry: Registry) -> None:
    server = build_server(registry)
    try:
        await registry.open()
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        await registry.aclose()
        await registry.pool.aclose()
