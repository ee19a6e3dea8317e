"""The official a2a-sdk's gRPC client as an outside caller uses it: resolved from a ranch card."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import grpc
import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.client.client import ClientCallContext
from a2a.client.interceptors import AfterArgs, BeforeArgs, ClientCallInterceptor
from a2a.types import AgentCard, a2a_pb2_grpc


class Metadata(ClientCallInterceptor):
    """Sends `pairs` as gRPC metadata with every call (an API key, `a2a-extensions`)."""

    def __init__(self, pairs: dict[str, str]) -> None:
        self.pairs = pairs

    async def before(self, args: BeforeArgs) -> None:
        context = args.context or ClientCallContext()
        context.service_parameters = {**(context.service_parameters or {}), **self.pairs}
        args.context = context

    async def after(self, args: AfterArgs) -> None:
        pass


async def grpc_card(agent_url: str) -> AgentCard:
    async with httpx.AsyncClient(timeout=30) as http:
        return await A2ACardResolver(http, agent_url).get_agent_card()


@contextlib.asynccontextmanager
async def grpc_client(
    agent_url: str, *, streaming: bool = False, metadata: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    """An a2a-sdk `Client` restricted to gRPC, for the agent whose card is at `agent_url`."""
    card = await grpc_card(agent_url)
    config = ClientConfig(
        streaming=streaming,
        supported_protocol_bindings=["GRPC"],
        grpc_channel_factory=grpc.aio.insecure_channel,
    )
    client = ClientFactory(config).create(card, interceptors=[Metadata(metadata or {})])
    try:
        yield client
    finally:
        await client.close()


def stub(channel: grpc.aio.Channel) -> a2a_pb2_grpc.A2AServiceStub:
    """The generated stub: raw calls, with no client-side checks (bad input, metadata read back)."""
    return a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
