"""Remote A2A agents written with the official a2a-sdk server stack, for interop tests.

ranch must work with agents it did not write; these peers are built only from a2a-sdk parts
(DefaultRequestHandler, AgentExecutor, InMemoryTaskStore, the SDK's Starlette routes), so a test
against them exercises the real wire format rather than ranch talking to itself. Every peer
records what reached it, both as raw HTTP and as the messages its executor saw.

Kinds (see `build_peer_app`):

- ``router``: declares the client-routing extension; completes a task whose final message
  carries a routing decision in ``metadata[ROUTING_URI]``.
- ``plain``: no extension; answers with a direct Message, no task.
- ``asker``: asks for input first (INPUT_REQUIRED), completes on the follow-up with that task_id.
- ``slow``: works for ``delay`` seconds before completing; cancellable meanwhile.
- ``gated``: opens its task and works until the test sets its ``gate`` (a threading.Event).
- ``failing``: its executor raises.
- ``garbage``: a valid card, but every POST gets HTTP 200 with a body that is not JSON.
- ``echoall``: answers with a direct Message echoing every text part it received, the Router's
  context part included (what a member is shown is what it can repeat).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.server.tasks.task_updater import TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from _support.servers import ServerThread, bind_socket

ROUTING_URI = "https://ranch.woi.dev/extensions/client-routing/v1"
"""The client-routing extension URI (kept literal here so tests catch a drift in src)."""

CARD_PATH = "/.well-known/agent-card.json"
"""Where a peer serves its card."""
PEER_KINDS = ("router", "plain", "asker", "slow", "gated", "failing", "garbage", "echoall")

GARBAGE_BODY = b"not json at all"


# --------------------------------------------------------------------------- recording


@dataclass
class RecordedRequest:
    """One HTTP request as it reached the peer; `body` fills in as the app reads it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes = b""

    def json(self) -> Any:
        """The body parsed as JSON (raises if it is not)."""
        return json.loads(self.body)


@dataclass
class RecordedMessage:
    """One user message as the peer's executor received it."""

    text: str
    metadata: dict[str, Any]
    extensions: list[str]
    task_id: str
    context_id: str
    requested_extensions: list[str] = field(default_factory=list)
    """What the caller asked for in the A2A-Extensions header."""
    request_metadata: dict[str, Any] = field(default_factory=dict)
    """SendMessageRequest.metadata (not the message's)."""


class PeerRecorder:
    """What reached one peer. Written from the server thread, read from the test thread."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.messages: list[RecordedMessage] = []
        self.cancelled: list[str] = []
        """Task ids the SDK asked the executor to cancel."""
        self._changed = threading.Condition()

    def add_request(self, request: RecordedRequest) -> None:
        """Record an arriving HTTP request."""
        with self._changed:
            self.requests.append(request)
            self._changed.notify_all()

    def add_message(self, message: RecordedMessage) -> None:
        """Record a message the executor received."""
        with self._changed:
            self.messages.append(message)
            self._changed.notify_all()

    def add_cancel(self, task_id: str) -> None:
        """Record a cancellation the executor received."""
        with self._changed:
            self.cancelled.append(task_id)
            self._changed.notify_all()

    def posts(self) -> list[RecordedRequest]:
        """Only the POSTs: the A2A calls, without card fetches."""
        return [r for r in self.requests if r.method == "POST"]

    def wait_for_messages(self, count: int, timeout: float = 5.0) -> list[RecordedMessage]:
        """Block until at least `count` messages arrived; TimeoutError after `timeout` s."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self.messages) >= count, timeout):
                raise TimeoutError(f"peer saw {len(self.messages)} message(s), wanted {count}")
            return list(self.messages)

    def wait_for_cancel(self, timeout: float = 5.0) -> list[str]:
        """Block until a cancellation reached the executor; TimeoutError after `timeout` s."""
        with self._changed:
            if not self._changed.wait_for(lambda: bool(self.cancelled), timeout):
                raise TimeoutError("peer saw no cancellation")
            return list(self.cancelled)


class RecordingMiddleware:
    """Pure ASGI: records each HTTP request and copies body chunks as the app reads them. While a
    `card_hold` (a threading.Event) is set, reads of the card wait: a caller that reads the card before
    each call is held just before calling."""

    def __init__(
        self, app: ASGIApp, recorder: PeerRecorder, card_hold: threading.Event | None = None
    ) -> None:
        self.app = app
        self.recorder = recorder
        self.card_hold = card_hold

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        record = RecordedRequest(method=scope["method"], path=scope["path"], headers=headers)
        self.recorder.add_request(record)
        if self.card_hold is not None and scope["path"] == CARD_PATH:
            while self.card_hold.is_set():  # noqa: ASYNC110 - cleared from the test's thread
                await asyncio.sleep(0.02)
        chunks: list[bytes] = []

        async def tee() -> AsgiMessage:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
                record.body = b"".join(chunks)
            return message

        await self.app(scope, tee, send)


# --------------------------------------------------------------------------- executors


def _agent_message(context: RequestContext, text: str, *, in_task: bool = True, **fields: Any) -> Message:
    return Message(
        role=Role.ROLE_AGENT,
        message_id=str(uuid.uuid4()),
        context_id=context.context_id or "",
        task_id=(context.task_id or "") if in_task else "",
        parts=[Part(text=text)],
        **fields,
    )


class _PeerExecutor(AgentExecutor):
    """Records every incoming message, then lets the subclass answer."""

    def __init__(self, recorder: PeerRecorder, opts: dict[str, Any]) -> None:
        self.recorder = recorder
        self.opts = opts

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        if message is not None:
            self.recorder.add_message(
                RecordedMessage(
                    text=context.get_user_input(),
                    metadata=MessageToDict(message.metadata),
                    extensions=list(message.extensions),
                    task_id=context.task_id or "",
                    context_id=context.context_id or "",
                    requested_extensions=sorted(context.requested_extensions),
                    request_metadata=context.metadata,
                )
            )
        await self.answer(context, event_queue, context.get_user_input())

    async def answer(self, context: RequestContext, event_queue: EventQueue, text: str) -> None:
        raise NotImplementedError

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.recorder.add_cancel(context.task_id or "")
        await self.updater(context, event_queue).cancel()

    @staticmethod
    def updater(context: RequestContext, event_queue: EventQueue) -> TaskUpdater:
        return TaskUpdater(event_queue, context.task_id or "", context.context_id or "")

    @staticmethod
    async def open_task(context: RequestContext, event_queue: EventQueue) -> None:
        """Enqueue the Task itself unless it exists: the SDK rejects status updates before it."""
        if context.current_task is not None:
            return
        history = [context.message] if context.message is not None else []
        await event_queue.enqueue_event(
            Task(
                id=context.task_id or "",
                context_id=context.context_id or "",
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=history,
            )
        )


class RouterExecutor(_PeerExecutor):
    """Completes a task whose final message carries a client-routing decision."""

    async def answer(self, context: RequestContext, event_queue: EventQueue, text: str) -> None:
        await self.open_task(context, event_queue)
        decision: dict[str, Any] = {
            "recipient": self.opts.get("route_to", "user"),
            "reason": self.opts.get("reason", "peer decided"),
        }
        if self.opts.get("usage"):  # what the answer cost, in the extension's `usage` field
            decision["usage"] = self.opts["usage"]
        if self.opts.get("handoffs") is not None:  # the peers offered to the next agent
            decision["handoffs"] = self.opts["handoffs"]
        reply = _agent_message(
            context, f"router saw: {text}", metadata={ROUTING_URI: decision}, extensions=[ROUTING_URI]
        )
        await self.updater(context, event_queue).complete(reply)


class PlainExecutor(_PeerExecutor):
    """Answers with one direct Message: no task is ever created."""

    async def answer(self, context: RequestContext, event_queue: EventQueue, text: str) -> None:
        await event_queue.enqueue_event(_agent_message(context, f"plain saw: {text}", in_task=False))


class AskerExecutor(_PeerExecutor):
    """Asks for a name (INPUT_REQUIRED); the follow-up on the same task completes it."""

    async def answer(self, context: RequestContext, event_queue: EventQueue, text: str) -> None:
        updater = self.updater(context, event_queue)
        # The SDK loads the stored task into current_task when the message names its task_id.
        if context.current_task is None:
            await self.open_task(context, event_queue)
            await updater.requires_input(
                _agent_message(context, self.opts.get("question", "What is your name?"))
            )
        else:
            await updater.complete(_agent_message(context, f"Hello, {text}!"))


class SlowExecutor(_PeerExecutor):
    """Reports WORKING, sleeps `delay` s, then completes; a cancel interrupts the sleep."""

    async def answer(self, context: RequestContext, event_queue: EventQueue, text: str) -> None:
        await self.open_task(context, event_queue)
        updater = self.updater(context, event_queue)
        await updater.start_work(_agent_message(context, "working on it"))
        await asyncio.sleep(float(self.opts.get("delay", 30.0)))
        await updater.complete(_agent_message(context, f"slow saw: {text}"))


class GatedExecutor(_PeerExecutor):
    """Opens its task and reports WORKING at once, then completes only once the test sets `gate` (a
    threading.Event): a hop in flight for as long as the test needs it."""

    async def answer(self, context: RequestContext, event_queue: EventQueue, text: str) -> None:
        await self.open_task(context, event_queue)
        updater = self.updater(context, event_queue)
        await updater.start_work(_agent_message(context, "working on it"))
        gate: threading.Event = self.opts["gate"]
        while not gate.is_set():  # noqa: ASYNC110 - set from the test's thread
            await asyncio.sleep(0.02)
        await updater.complete(_agent_message(context, f"{self.opts.get('name', 'gated')} saw: {text}"))


class FailingExecutor(_PeerExecutor):
    """Raises; with `after_task=True` it first opens a task and starts work, then raises."""

    async def answer(self, context: RequestContext, event_queue: EventQueue, text: str) -> None:
        if self.opts.get("after_task", False):
            await self.open_task(context, event_queue)
            await self.updater(context, event_queue).start_work(_agent_message(context, "about to fail"))
        raise RuntimeError(self.opts.get("error", "peer exploded"))


class EchoAllExecutor(_PeerExecutor):
    """Echoes every text part of the message, context part included: "ECHOALL: a || b"."""

    async def answer(self, context: RequestContext, event_queue: EventQueue, text: str) -> None:
        message = context.message
        parts = [part.text for part in message.parts if part.HasField("text")] if message else []
        echoed = "ECHOALL: " + " || ".join(parts)
        await event_queue.enqueue_event(_agent_message(context, echoed, in_task=False))


_EXECUTORS: dict[str, type[_PeerExecutor]] = {
    "router": RouterExecutor,
    "plain": PlainExecutor,
    "asker": AskerExecutor,
    "slow": SlowExecutor,
    "gated": GatedExecutor,
    "failing": FailingExecutor,
    "echoall": EchoAllExecutor,
}


# --------------------------------------------------------------------------- apps


def peer_card(kind: str, *, base_url: str, name: str | None = None, routing: bool = False) -> AgentCard:
    """A spec-complete card: JSON-RPC 1.0 at base_url + "/", HTTP+JSON 1.0 at base_url, streaming."""
    base = base_url.rstrip("/")
    extensions = (
        [AgentExtension(uri=ROUTING_URI, description="Answers with the next recipient.", required=False)]
        if routing
        else []
    )
    return AgentCard(
        name=name or f"{kind} peer",
        description=f"A test peer ({kind}) built with the official a2a-sdk.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=f"{base}/"),
            AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=base),
        ],
        capabilities=AgentCapabilities(streaming=True, extensions=extensions),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id=kind, name=kind, description=f"Behaves as the {kind} peer.", tags=[kind])],
    )


def build_peer_app(kind: str, *, base_url: str, **opts: Any) -> tuple[Starlette, PeerRecorder]:
    """The peer app of one kind (see the module docstring) and the recorder it writes to.

    opts: ``name`` (card name); ``input_modes`` (the card's, default text/plain); ``sign`` (a
    function that signs the card); router ``route_to`` (default "user"; any JSON value, a
    malformed one too), ``usage`` (reported in its answer), ``reason``, ``handoffs``; ``card_hold``
    (reads of the card wait while it is set); asker
    ``question``; slow ``delay`` (default 30 s); gated ``gate``; failing ``error``, ``after_task``.
    """
    if kind == "garbage":
        return garbage_app(base_url=base_url, name=opts.get("name"))
    if kind not in _EXECUTORS:
        raise ValueError(f"unknown peer kind {kind!r}; expected one of {PEER_KINDS}")
    recorder = PeerRecorder()
    card = peer_card(kind, base_url=base_url, name=opts.get("name"), routing=kind == "router")
    if opts.get("input_modes"):
        del card.default_input_modes[:]
        card.default_input_modes.extend(opts["input_modes"])
    if opts.get("sign") is not None:
        card = opts["sign"](card)
    handler = DefaultRequestHandler(
        agent_executor=_EXECUTORS[kind](recorder, opts), task_store=InMemoryTaskStore(), agent_card=card
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()  # cancel still-running executors (a slow peer) before the loop closes

    # Card first, JSON-RPC before REST: REST also mounts "/{tenant}" routes.
    routes: list[BaseRoute] = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url="/", enable_v0_3_compat=True),
        *create_rest_routes(handler, path_prefix="", enable_v0_3_compat=True),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(
                RecordingMiddleware,
                recorder=recorder,
                card_hold=opts.get("card_hold"),
            )
        ],
        lifespan=lifespan,
    )
    return app, recorder


def garbage_app(*, base_url: str, name: str | None = None) -> tuple[Starlette, PeerRecorder]:
    """A valid card (JSON-RPC 1.0 at base_url + "/"), but every POST gets 200 `not json at all`."""
    recorder = PeerRecorder()
    card = peer_card("garbage", base_url=base_url, name=name)

    async def garbage(_request: Request) -> Response:
        return PlainTextResponse(GARBAGE_BODY)

    routes: list[BaseRoute] = [
        *create_agent_card_routes(card),
        Route("/{path:path}", garbage, methods=["POST"]),
    ]
    app = Starlette(routes=routes, middleware=[Middleware(RecordingMiddleware, recorder=recorder)])
    return app, recorder


@dataclass
class RunningPeer:
    """A peer being served on 127.0.0.1."""

    kind: str
    url: str
    app: Starlette
    recorder: PeerRecorder
    server: ServerThread


@contextlib.contextmanager
def running_peer(kind: str, **opts: Any) -> Iterator[RunningPeer]:
    """Serve one peer on a pre-bound loopback port for the duration of the block."""
    sock = bind_socket()
    port: int = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    app, recorder = build_peer_app(kind, base_url=url, **opts)
    with ServerThread(app, sock=sock, name=f"{kind}-peer") as server:
        yield RunningPeer(kind=kind, url=url, app=app, recorder=recorder, server=server)
