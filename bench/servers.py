"""The servers compared: ranch, the a2a-sdk's DefaultRequestHandler, bare Starlette, @a2a-js/sdk.

ranch runs as deployments run it: `ranch serve` (`RANCH_CONFIG`: `echo`, an echo agent, and
`tasker`, which answers with a completed Task), started by bench/wire.py as a child process of
the real CLI, its log and access log in a file. `python -m bench.servers KIND PORT` serves the
others on 127.0.0.1:

- sdk: the same echo behaviour as an a2a-sdk `AgentExecutor` under `DefaultRequestHandler`
  at `/`, and one that answers with a completed Task at `/task/` (for GetTask);
- bare: Starlette endpoints returning fixed bodies: the ceiling for any Python server here;
- ranch-app: ranch's app built in process with `create_app` (no access log), for `bench.profile`.

The @a2a-js/sdk echo server is `bench/js/echo-server.mjs` (Node; `make benchjs` installs it).
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
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ranch.config import parse_config
from ranch.hub.app import Settings, create_app

RANCH_CONFIG = """
agents:
  - {id: echo, kind: echo}
  - {id: tasker, kind: python, entry: "bench.servers:answer_with_task"}
"""


async def answer_with_task(message: Message, call: Any) -> Any:
    """ranch's twin of `TaskExecutor`: the same completed Task, for GetTask to read."""
    reply = Message(role=Role.ROLE_AGENT, message_id="reply", parts=[Part(text=message.parts[0].text)])
    status = TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=reply)
    yield Task(id=message.task_id, context_id=message.context_id, status=status)


class EchoExecutor(AgentExecutor):
    """The same behaviour as ranch's echo agent: one agent Message with the text it got."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        reply = Message(
            role=Role.ROLE_AGENT,
            message_id="reply",
            context_id=context.context_id or "",
            parts=[Part(text=context.get_user_input())],
        )
        await event_queue.enqueue_event(reply)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        return None


class TaskExecutor(EchoExecutor):
    """Answers with a completed Task, so there is something for GetTask to read."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        reply = Message(role=Role.ROLE_AGENT, message_id="reply", parts=[Part(text=context.get_user_input())])
        status = TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=reply)
        task = Task(id=context.task_id or "", context_id=context.context_id or "", status=status)
        await event_queue.enqueue_event(task)


def _card(port: int) -> AgentCard:
    return AgentCard(
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


def sdk_app(port: int) -> Starlette:
    card = _card(port)
    echo = DefaultRequestHandler(
        agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    tasks = DefaultRequestHandler(
        agent_executor=TaskExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    return Starlette(
        routes=[*create_jsonrpc_routes(echo, rpc_url="/"), *create_jsonrpc_routes(tasks, rpc_url="/task/")]
    )


FIXED: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {"message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "hello"}]}},
}


def bare_app() -> Starlette:
    async def endpoint(request: Request) -> Response:
        await request.body()
        return JSONResponse(FIXED)

    async def stream(request: Request) -> Response:
        await request.body()

        async def body() -> Any:
            yield b"data: " + JSONResponse(FIXED).body + b"\r\n\r\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    return Starlette(
        routes=[
            Route("/", endpoint, methods=["POST"]),
            Route("/task/", endpoint, methods=["POST"]),
            Route("/stream", stream, methods=["POST"]),
        ]
    )


def ranch_app() -> Any:
    """ranch's app in process, without the CLI: for profiling its code alone."""
    database = tempfile.mktemp(suffix=".db", prefix="ranch-bench-")
    # rate limits off: the load comes from one address and measures the server, not the policy
    settings = Settings(database_url=f"sqlite+aiosqlite:///{database}", caller_rate=None, agent_rate=None)
    return create_app(parse_config(RANCH_CONFIG), settings)


def main() -> None:
    kind, port = sys.argv[1], int(sys.argv[2])
    app = {"ranch-app": ranch_app, "sdk": lambda: sdk_app(port), "bare": bare_app}[kind]()
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
