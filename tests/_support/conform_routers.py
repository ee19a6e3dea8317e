"""A small router that speaks client-routing v1 as the spec says, twice: on the official a2a-sdk's
server stack (`serve_sdk_router`) and as a ranch `kind: python` agent (`RanchRouter`).

Both decide with `decide`: on the last hop, the user; asked to send something back, `sender`; else the
offered peer whose name or capability the text mentions; else the user. Without the request data (the
extension not negotiated) they answer as plain agents. `ranch conform` should pass them all.
"""

from __future__ import annotations

import contextlib
import re
import uuid
from collections.abc import AsyncGenerator, Iterator
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Message, Part, Role
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from _support.peers import peer_card
from _support.servers import ServerThread, bind_socket
from ranch import Call, Event, RoutingDecision, read_routing_request, reply, text_of

URI = "https://ranch.woi.dev/extensions/client-routing/v1"
"""Literal, as an implementer outside ranch writes it."""


def decide(text: str, data: dict[str, Any] | None) -> dict[str, str] | None:
    """The response data for `text` under the request data `data` (None: not negotiated)."""
    if data is None:
        return None
    if data.get("hopsRemaining") == 1:
        return {"recipient": "user", "reason": "no hop left for anyone else"}
    if "back to whoever sent it" in text.lower() and data.get("sender") != "user":
        return {"recipient": "sender", "reason": "returning the work"}
    words = set(re.findall(r"[a-z]+", text.lower()))
    for peer in data.get("agentCards") or []:
        if words & {
            str(peer.get("name", "")).lower(),
            *(str(c).lower() for c in peer.get("capabilities", [])),
        }:
            return {"recipient": peer["id"], "reason": f"{peer.get('name')} handles it"}
    return {"recipient": "user", "reason": "no peer offered fits"}


class SdkRouter(AgentExecutor):
    """The a2a-sdk way: read `metadata[URI]`, answer a Message whose `metadata[URI]` holds the decision."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        metadata = MessageToDict(message.metadata) if message is not None else {}
        negotiated = URI in context.requested_extensions
        decision = decide(context.get_user_input(), metadata.get(URI) if negotiated else None)
        answer = Message(
            role=Role.ROLE_AGENT,
            message_id=str(uuid.uuid4()),
            context_id=context.context_id or "",
            parts=[Part(text="routed" if decision else "answered")],
        )
        if decision is not None:
            answer.metadata.update({URI: decision})
            answer.extensions.append(URI)
        await event_queue.enqueue_event(answer)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError


@contextlib.contextmanager
def serve_sdk_router() -> Iterator[str]:
    """The SdkRouter on 127.0.0.1, its card declaring the extension; yields its base URL."""
    sock = bind_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    card = peer_card("router", base_url=url, name="sdk router", routing=True)
    handler = DefaultRequestHandler(
        agent_executor=SdkRouter(), task_store=InMemoryTaskStore(), agent_card=card
    )
    routes: list[BaseRoute] = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url="/"),
        *create_rest_routes(handler, path_prefix=""),
    ]
    with ServerThread(Starlette(routes=routes), sock=sock, name="sdk-router"):
        yield url


class RanchRouter:
    """The ranch way (`kind: python`, `client_routing: true`): `read_routing_request` and `reply`."""

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        request = read_routing_request(message)
        data = request.model_dump(by_alias=True) if request is not None else None
        decision = decide(text_of(message), data)
        if decision is None:
            yield reply(message, "answered")
            return
        yield reply(
            message, "routed", RoutingDecision(recipient=decision["recipient"], reason=decision["reason"])
        )
