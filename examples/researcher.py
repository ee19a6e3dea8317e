"""The README quickstart's remote `researcher`: a tiny A2A agent written with the official a2a-sdk only.

    python examples/researcher.py              # serves http://127.0.0.1:9001 (PORT=9002 for another)

It answers every message with "Research notes on '<text>': ..." and decides no route, so in a ranch
team its answer goes back to the team's default agent. When RESEARCH_TOKEN is set it also asks for
`Authorization: Bearer <RESEARCH_TOKEN>`, the header the quickstart's team.yaml sends it.
"""

from __future__ import annotations

import os
import uuid

import uvicorn
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Message, Part, Role
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send


class Researcher(AgentExecutor):
    """One direct Message per request: the notes on what was asked."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        asked = context.get_user_input().strip().splitlines() or [""]  # (a team may add context first)
        topic = asked[-1].split(": ", 1)[-1]  # "Routing to the researcher: <topic>" -> the topic
        notes = f"Research notes on '{topic}': 1) a survey, 2) a recent preprint, 3) a textbook chapter."
        await event_queue.enqueue_event(
            Message(
                role=Role.ROLE_AGENT,
                message_id=str(uuid.uuid4()),
                context_id=context.context_id or "",
                parts=[Part(text=notes)],
            )
        )

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing runs long enough to cancel."""


class BearerToken:
    """Refuse calls without `Authorization: Bearer <token>` (the card stays public)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app, self.expected = app, f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            if dict(scope["headers"]).get(b"authorization") != self.expected:
                await JSONResponse({"error": "wrong or missing bearer token"}, 401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def card(base_url: str) -> AgentCard:
    return AgentCard(
        name="Researcher",
        description="Finds sources and summarises them (an a2a-sdk example)",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=f"{base_url}/"),
            AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=base_url),
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="papers", name="find papers", description="Finds papers", tags=["research"])],
    )


def build_app(base_url: str, token: str = "") -> Starlette:
    """The agent's app, its card naming `base_url`; `token` set: calls must bear it."""
    agent_card = card(base_url.rstrip("/"))
    handler = DefaultRequestHandler(
        agent_executor=Researcher(), task_store=InMemoryTaskStore(), agent_card=agent_card
    )
    routes = [
        *create_agent_card_routes(agent_card),
        *create_jsonrpc_routes(handler, rpc_url="/"),
        *create_rest_routes(handler),
    ]
    middleware = [Middleware(BearerToken, token=token)] if token else []
    return Starlette(routes=routes, middleware=middleware)


if __name__ == "__main__":
    port = int(os.environ.get("PORT", "9001"))
    app = build_app(f"http://127.0.0.1:{port}", os.environ.get("RESEARCH_TOKEN", ""))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
