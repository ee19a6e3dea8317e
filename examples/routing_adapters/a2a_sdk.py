"""Client-routing v1 for any a2a-sdk agent: wrap its `AgentExecutor`, and its answers name who acts next.

A router (a ranch team, or any orchestrator speaking docs/extension/client-routing-v1.md) sends its
peers' cards in `message.metadata[URI]` and follows the `recipient` the agent answers. This module
adds that to an executor you already have, without touching it, with the a2a-sdk (1.x) alone: it
does not import ranch, so copy it into your project.

    from a2a_sdk import RoutingExecutor, declare, routing_app

    def decide(request: dict, asked: str, answered: str) -> dict | None:
        peers = {card["id"] for card in request["agentCards"]}  # this request's, never remembered
        if "billing" in peers and "invoice" in asked.lower():
            return {"recipient": "billing", "reason": "an invoice"}
        return {"recipient": "user", "reason": "answered"}

    app = routing_app(RoutingExecutor(MyExecutor(), decide), declare(my_card))   # uvicorn app ...

Or the wrapped executor decides itself, while it runs: `routing_request(context)` gives it the
request data (None when the extension was not negotiated) and `set_decision(context, "billing",
"an invoice")` records the answer; that wins over `decide`.

What the wrapper does, as the spec says:

- reads `metadata[URI]` only when the caller asked for the extension (`A2A-Extensions` header), and
  otherwise runs the executor untouched (a plain A2A agent);
- writes the decision on the reply: a Message's `metadata[URI]`, or a completed task's final status
  message and the task's own metadata (both places a router reads), listing the URI in the
  message's `extensions`;
- keeps the decision valid: a recipient that is not `user`, `sender` or an offered peer is dropped
  (no decision: the router decides), and on the last hop (`hopsRemaining: 1`) a peer becomes `user`;
- activates the extension in the response's `A2A-Extensions` header (`ActivationHeader`, an ASGI
  middleware: the a2a-sdk 1.x server has no API for it; `routing_app` installs it).

Run `python a2a_sdk.py --port 9001` for a demo help desk that hands invoices to a `billing` peer.
"""

from __future__ import annotations

import argparse
import contextvars
import inspect
import re
from collections.abc import Awaitable, Callable
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

URI = "https://ranch.woi.dev/extensions/client-routing/v1"

Decision = dict[str, Any]
"""Response data: `{"recipient": ..., "reason": ...}`, optionally `handoffs` and `usage`."""
Event = Message | Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent
"""What an executor enqueues."""
Decide = Callable[[dict[str, Any], str, str], Awaitable[Decision | None] | Decision | None]
"""(request data, the text asked, the text answered) -> the decision, or None to leave it to the router."""

_DECISION = f"{URI}#decision"
"""Where `set_decision` keeps the decision: the request's `ServerCallContext.state`."""
_activated: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("a2a_activated", default=None)


# -- the request data and the decision -------------------------------------------------------------


def routing_request(context: RequestContext) -> dict[str, Any] | None:
    """The request data, when the caller negotiated the extension (else None: answer as a plain agent).

    Reading it activates the extension for this request (see `ActivationHeader`)."""
    if URI not in context.requested_extensions or context.message is None:
        return None
    data = MessageToDict(context.message.metadata).get(URI)
    if not isinstance(data, dict):
        return None
    activate(URI)
    return data


def set_decision(context: RequestContext, recipient: str, reason: str | None = None, **more: Any) -> None:
    """Record the decision from inside the wrapped executor; it wins over the wrapper's `decide`."""
    context.call_context.state[_DECISION] = {"recipient": recipient, "reason": reason, **more}


def checked(decision: Decision | None, request: dict[str, Any]) -> Decision | None:
    """`decision` as the spec allows it for `request`: None when its recipient was not offered."""
    recipient = (decision or {}).get("recipient")
    if decision is None or not isinstance(recipient, str) or not recipient.strip():
        return None
    recipient = recipient.strip()
    peers = {card.get("id") for card in request.get("agentCards") or [] if isinstance(card, dict)}
    if recipient not in {"user", "sender", *peers}:
        return None
    handing_on = recipient in peers or (recipient == "sender" and request.get("sender") != "user")
    if request.get("hopsRemaining") == 1 and handing_on:
        return {"recipient": "user", "reason": "no hop left for anyone else"}
    return {key: value for key, value in {**decision, "recipient": recipient}.items() if value is not None}


# -- the wrapper -----------------------------------------------------------------------------------


class RoutingExecutor(AgentExecutor):
    """`inner`, whose replies carry the decision when the caller negotiated the extension."""

    def __init__(self, inner: AgentExecutor, decide: Decide | None = None) -> None:
        self.inner = inner
        self.decide = decide

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        request = routing_request(context)
        if request is None:
            await self.inner.execute(context, event_queue)
            return
        await self.inner.execute(context, _Stamping(event_queue, self, context, request))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await self.inner.cancel(context, event_queue)

    async def decision(
        self, context: RequestContext, request: dict[str, Any], answered: str
    ) -> Decision | None:
        chosen = context.call_context.state.get(_DECISION)
        if chosen is None and self.decide is not None:
            chosen = self.decide(request, context.get_user_input(), answered)
            if inspect.isawaitable(chosen):
                chosen = await chosen
        return checked(chosen, request)


class _Stamping(EventQueue):
    """The queue the wrapped executor writes to: the reply gets the decision on its way out."""

    def __init__(
        self, queue: EventQueue, owner: RoutingExecutor, context: RequestContext, request: dict[str, Any]
    ) -> None:
        self.queue, self.owner, self.context, self.request = queue, owner, context, request
        self.said: list[str] = []

    async def enqueue_event(self, event: Event) -> None:
        self.said.extend(_texts(event))
        if _ends_the_answer(event):
            decision = await self.owner.decision(self.context, self.request, "\n".join(self.said))
            if decision is not None:
                _stamp(event, decision)
        await self.queue.enqueue_event(event)


def _ends_the_answer(event: Event) -> bool:
    if isinstance(event, Message):
        return True
    completed = TaskState.TASK_STATE_COMPLETED
    return isinstance(event, Task | TaskStatusUpdateEvent) and event.status.state == completed


def _stamp(event: Event, decision: Decision) -> None:
    """The decision on the message that carries the reply and, for a task, on the task itself (the
    places a router reads, in its order: the message first)."""
    if isinstance(event, Message):
        messages = [event]
    else:
        event.metadata.update({URI: decision})
        messages = [event.status.message] if event.status.HasField("message") else []
    for message in messages:
        message.metadata.update({URI: decision})
        if URI not in message.extensions:
            message.extensions.append(URI)


def _texts(event: Event) -> list[str]:
    if isinstance(event, Message):
        parts = list(event.parts)
    elif isinstance(event, TaskArtifactUpdateEvent):
        parts = list(event.artifact.parts)
    else:
        parts = list(event.status.message.parts) if event.status.HasField("message") else []
    return [part.text for part in parts if part.text]


# -- serving ---------------------------------------------------------------------------------------


def activate(uri: str) -> None:
    """Mark `uri` activated for the request being served (no-op outside `ActivationHeader`)."""
    activated = _activated.get()
    if activated is not None:
        activated.add(uri)


class ActivationHeader:
    """ASGI middleware: lists the extensions `activate`d while serving a request in its response's
    `A2A-Extensions` header. The executor runs in a task started within the request, so it sees
    this request's set. A streamed answer sends its headers first: only what was activated by then
    is listed."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        activated: set[str] = set()
        token = _activated.set(activated)

        async def send_listing(message: AsgiMessage) -> None:
            if message["type"] == "http.response.start" and activated:
                listed = (b"a2a-extensions", ", ".join(sorted(activated)).encode())
                message = {**message, "headers": [*message.get("headers", []), listed]}
            await send(message)

        try:
            await self.app(scope, receive, send_listing)
        finally:
            _activated.reset(token)


def declare(card: AgentCard, required: bool = False) -> AgentCard:
    """`card`, its `capabilities.extensions` listing the extension (the declaration routers look for)."""
    if all(extension.uri != URI for extension in card.capabilities.extensions):
        description = "Receives its peers' cards in message metadata and answers with the next recipient."
        card.capabilities.extensions.append(
            AgentExtension(uri=URI, description=description, required=required)
        )
    return card


def routing_app(executor: AgentExecutor, card: AgentCard) -> Starlette:
    """`executor` served as the a2a-sdk serves any agent (card, JSON-RPC at `/`, HTTP+JSON), plus
    `ActivationHeader`."""
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url="/"),
        *create_rest_routes(handler, path_prefix=""),
    ]
    return Starlette(routes=routes, middleware=[Middleware(ActivationHeader)])


# -- the demo: a help desk that knows nothing of routing, and a `decide` by keywords ---------------


class HelpDesk(AgentExecutor):
    """A plain a2a-sdk agent: it answers every message with a completed task."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        if context.current_task is None:
            history = [context.message] if context.message is not None else []
            task = Task(id=context.task_id or "", context_id=context.context_id or "", history=history)
            task.status.CopyFrom(TaskStatus(state=TaskState.TASK_STATE_SUBMITTED))
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        answer = f"Help desk: noted ({context.get_user_input()[:60]})."
        await updater.complete(updater.new_agent_message([Part(text=answer)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def by_keywords(request: dict[str, Any], asked: str, answered: str) -> Decision:
    """Send it back when asked to; else to the peer whose name or capability the text names; else the user."""
    if "back to whoever sent it" in asked.lower() and request.get("sender") != "user":
        return {"recipient": "sender", "reason": "returning the work"}
    words = set(re.findall(r"[a-z]+", asked.lower()))
    for card in request.get("agentCards") or []:
        names = {str(card.get("name", "")).lower(), *(str(c).lower() for c in card.get("capabilities") or [])}
        if words & names:
            return {"recipient": card["id"], "reason": f"{card.get('name')} handles it"}
    return {"recipient": "user", "reason": "answered"}


def demo_card(url: str) -> AgentCard:
    return declare(
        AgentCard(
            name="help desk",
            description="Takes every question; hands each to the peer that handles it.",
            version="1.0.0",
            supported_interfaces=[
                AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=f"{url}/"),
                AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=url),
            ],
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[
                AgentSkill(id="triage", name="triage", description="Answers or hands over.", tags=["triage"])
            ],
        )
    )


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(description="Serve the demo help desk on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=9001)
    port = parser.parse_args().port
    app = routing_app(RoutingExecutor(HelpDesk(), by_keywords), demo_card(f"http://127.0.0.1:{port}"))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main()
