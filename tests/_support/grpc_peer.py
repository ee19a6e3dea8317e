"""A remote A2A agent served over gRPC by the official a2a-sdk (`GrpcHandler`), for member tests.

Its card, at `{url}/.well-known/agent-card.json` over HTTP, lists one interface: GRPC 1.0 at
`127.0.0.1:<port>` with a tenant, so a caller must speak gRPC and send that tenant. The executors
are the HTTP peers' (tests/_support/peers.py); the servicer records the tenant and metadata of
every call it gets.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler, GrpcHandler
from a2a.server.routes import create_agent_card_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentInterface, a2a_pb2_grpc
from google.protobuf.message import Message
from starlette.applications import Starlette

from _support.peers import _EXECUTORS, PeerRecorder, peer_card
from _support.servers import HOST, ServerThread, bind_socket, free_port


@dataclass
class GrpcCalls:
    """The tenant and metadata of each call the peer got (written by its server thread)."""

    tenants: list[str] = field(default_factory=list)
    metadata: list[dict[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, tenant: str, metadata: dict[str, str]) -> None:
        with self._lock:
            self.tenants.append(tenant)
            self.metadata.append(metadata)


class _Recording(GrpcHandler):
    def __init__(self, handler: DefaultRequestHandler, calls: GrpcCalls) -> None:
        super().__init__(handler)
        self.calls = calls

    def _build_call_context(self, context: grpc.aio.ServicerContext, request: Message) -> ServerCallContext:
        pairs = {k: v for k, v in context.invocation_metadata() or () if isinstance(v, str)}
        self.calls.add(getattr(request, "tenant", ""), pairs)
        return super()._build_call_context(context, request)


@dataclass
class GrpcPeer:
    url: str
    """Where its card is served (HTTP)."""
    grpc_port: int
    recorder: PeerRecorder
    calls: GrpcCalls


@contextlib.contextmanager
def running_grpc_peer(kind: str, *, tenant: str = "peer-tenant", **opts: Any) -> Iterator[GrpcPeer]:
    """Serve a peer of `kind` (peers.py's kinds) over gRPC, its card over HTTP, on 127.0.0.1."""
    sock = bind_socket()
    url = f"http://{HOST}:{sock.getsockname()[1]}"
    grpc_port = free_port()
    recorder, calls = PeerRecorder(), GrpcCalls()
    card = peer_card(kind, base_url=url, routing=kind == "router")
    del card.supported_interfaces[:]
    card.supported_interfaces.append(
        AgentInterface(
            protocol_binding="GRPC", protocol_version="1.0", url=f"{HOST}:{grpc_port}", tenant=tenant
        )
    )
    handler = DefaultRequestHandler(
        agent_executor=_EXECUTORS[kind](recorder, opts), task_store=InMemoryTaskStore(), agent_card=card
    )

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        server = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(_Recording(handler, calls), server)  # type: ignore[no-untyped-call]
        server.add_insecure_port(f"{HOST}:{grpc_port}")
        await server.start()
        try:
            yield
        finally:
            await server.stop(1)
            await handler.aclose()

    app = Starlette(routes=create_agent_card_routes(card), lifespan=lifespan)
    with ServerThread(app, sock=sock, name=f"{kind}-grpc-peer"):
        yield GrpcPeer(url=url, grpc_port=grpc_port, recorder=recorder, calls=calls)
