"""The servers compared: ranch, the a2a-sdk's DefaultRequestHandler, and a bare Starlette endpoint.

Each serves an echo agent (the bare endpoint returns a fixed JSON body: the
ceiling for any Python server on this stack). Run one with
`python -m bench.servers KIND PORT`; it binds 127.0.0.1 only.
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

import uvicorn
from a2a.server.agent_execution.agent_executor import AgentExecutor
from a2a.server.agent_execution.context import RequestContext
from a2a.server.events.event_queue import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Message, Part, Role
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ranch.config import parse_config
from ranch.hub.app import Settings, create_app

ECHO_CONFIG = "agents:\n  - {id: echo, kind: echo}\n"


class EchoExecutor(AgentExecutor):
    """The same behaviour as ranch's echo agent: one agent Message with the text it got."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        await event_queue.enqueue_event(
            Message(
                role=Role.ROLE_AGENT,
                message_id="reply",
                context_id=context.context_id or "",
                parts=[Part(text=context.get_user_input())],
            )
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        return None


def sdk_app(port: int) -> Starlette:
    card = AgentCard(
        name="echo",
        description="echo",
        version="1",
        supported_interfaces=[
            AgentInterface(
                protocol_binding="JSONRPC", protocol_version="1.0", url=f"http://127.0.0.1:{port}/"
            )
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
    )
    handler = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    return Starlette(routes=create_jsonrpc_routes(handler, rpc_url="/"))


FIXED = {"jsonrpc": "2.0", "id": 1, "result": {"message": {"role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}}


def bare_app() -> Starlette:
    async def endpoint(request: Request) -> Response:
        await request.body()
        return JSONResponse(FIXED)

    return Starlette(routes=[Route("/", endpoint, methods=["POST"])])


def ranch_app() -> Any:
    database = tempfile.mktemp(suffix=".db", prefix="ranch-bench-")
    return create_app(parse_config(ECHO_CONFIG), Settings(database_url=f"sqlite+aiosqlite:///{database}"))


def main() -> None:
    kind, port = sys.argv[1], int(sys.argv[2])
    app = {"ranch": ranch_app, "sdk": lambda: sdk_app(port), "bare": bare_app}[kind]()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
