# mypy: ignore-errors
# (written against mcp 1.x, which is not the SDK in the venv mypy checks with)
"""List and call ranch's MCP tools as an mcp 1.x client does (run with .venv-mcp1, `make mcp1`).

Usage: client.py URL, or client.py COMMAND ARGS... (a server over stdio). Prints one JSON object:
the negotiated protocol version, the tool names, the answers of `ask_helpdesk` and of an unknown
tool, and the session id the server gave (over HTTP).
Not collected by pytest: it runs in the mcp 1.x venv, as a subprocess (tests/hub/test_mcp_sdk_eras.py).
"""

import json
import sys
from contextlib import asynccontextmanager

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client


@asynccontextmanager
async def connected(target: list[str]):
    if target[0].startswith("http"):
        async with streamablehttp_client(target[0]) as (read, write, session_id):
            yield read, write, session_id
    else:
        async with stdio_client(StdioServerParameters(command=target[0], args=target[1:])) as (read, write):
            yield read, write, lambda: None


async def main(target: list[str]) -> None:
    async with connected(target) as (read, write, session_id), ClientSession(read, write) as session:
        init = await session.initialize()
        listed = await session.list_tools()
        answer = await session.call_tool("ask_helpdesk", {"message": "find papers on otters"})
        again = await session.call_tool(
            "ask_helpdesk",
            {"message": "and on seals", "context_id": (answer.structuredContent or {}).get("context_id", "")},
        )
        unknown = await session.call_tool("ask_nobody", {"message": "hi"})
        print(
            json.dumps(
                {
                    "protocol": init.protocolVersion,
                    "server": init.serverInfo.name,
                    "tools": sorted(tool.name for tool in listed.tools),
                    "schema": next(t.inputSchema for t in listed.tools if t.name == "ask_helpdesk"),
                    "answer": answer.structuredContent,
                    "again": again.structuredContent,
                    "unknown": {"is_error": unknown.isError, "text": unknown.content[0].text},
                    "session_id": session_id(),
                }
            )
        )


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
