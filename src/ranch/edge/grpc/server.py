"""The gRPC server: one port beside the HTTP one, started and stopped by the hub's lifespan."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import grpc
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import a2a_pb2_grpc
from google.protobuf.message import DecodeError

from ranch.edge.grpc.port import GrpcPort
from ranch.edge.grpc.servicer import SERVICE, GuardedGrpcHandler, Malformed
from ranch.edge.guards import Guards
from ranch.exceptions import ConfigError
from ranch.policy.logs import AccessLog

logger = logging.getLogger(__name__)
GRACE = 5.0
"""Seconds calls in flight get to finish when the server stops."""


def serve_grpc(
    port: GrpcPort,
    handler: RequestHandler,
    guards: Guards,
    *,
    access_log: AccessLog | None = None,
    debug: bool = False,
) -> Callable[[], AbstractAsyncContextManager[None]]:
    """A hub service (`Hub.services`) serving A2A over gRPC on `port` while the hub runs."""

    @asynccontextmanager
    async def serving() -> AsyncIterator[None]:
        servicer = GuardedGrpcHandler(handler, guards, access_log=access_log, debug=debug)
        limit = 2 * guards.max_body + 1024  # larger ones are refused by the chain, naming the limit
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", limit),
                ("grpc.so_reuseport", 0),  # a port in use is an error, not shared
            ]
        )
        server.add_registered_method_handlers(SERVICE, _handlers(servicer))
        address = port.target(port.host)  # [::]:50051 for an IPv6 host
        try:
            if port.tls is None:
                bound = server.add_insecure_port(address)
            else:
                bound = server.add_secure_port(address, _credentials(*port.tls))
        except RuntimeError as exc:
            raise ConfigError([f"--grpc-port {port.port}: cannot listen on {address} ({exc})"]) from None
        if not bound:
            raise ConfigError([f"--grpc-port {port.port}: cannot listen on {address} (in use?)"])
        port.port = bound
        await server.start()
        logger.info("serving A2A over gRPC on %s%s", address, " (TLS)" if port.tls else "")
        try:
            yield
        finally:  # the hub's task group is cancelled by now: the stop is shielded, and bounded
            with anyio.move_on_after(GRACE + 1, shield=True):
                await server.stop(GRACE)
            logger.info("stopped serving A2A over gRPC on %s", address)

    return serving


def _credentials(certfile: str, keyfile: str) -> grpc.ServerCredentials:
    return grpc.ssl_server_credentials([(Path(keyfile).read_bytes(), Path(certfile).read_bytes())])


class _Capture:
    """Stands for a server to the generated `add_A2AServiceServicer_to_server`, keeping its handlers."""

    handlers: dict[str, Any]

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: dict[str, Any]) -> None:
        self.handlers = handlers


def _handlers(servicer: GuardedGrpcHandler) -> dict[str, Any]:
    """The generated method handlers, each reading a request it cannot parse as `Malformed`."""
    capture = _Capture()
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, capture)  # type: ignore[no-untyped-call]
    return {
        method: handler._replace(request_deserializer=_tolerant(method, handler.request_deserializer))
        for method, handler in capture.handlers.items()
    }


def _tolerant(method: str, parse: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    message_type = getattr(getattr(parse, "__self__", None), "DESCRIPTOR", None)
    name = message_type.full_name if message_type is not None else "request"

    def parsed(data: bytes) -> Any:
        try:
            return parse(data)
        except DecodeError as exc:
            return Malformed(method, name, str(exc) or "cannot be parsed")

    return parsed
