"""Shared fixtures: loopback-only network, anyio on asyncio, ranch servers on real ports."""

from __future__ import annotations

import contextlib
import socket
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, Task
from google.protobuf.json_format import MessageToDict

import probes
from ranch.config import RanchConfig, parse_config
from ranch.hub.app import Settings, create_app
from ranch.wire.client_routing import URI
from servers import ServerThread, bind_socket

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS))  # `entry: probes:Probe` in test configs

_LOOPBACK = ("127.0.0.1", "::1", "localhost")
_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: Any) -> Any:
    if self.family in (socket.AF_INET, socket.AF_INET6):
        host = address[0]
        if host not in _LOOPBACK:
            raise ConnectionRefusedError(f"tests may only connect to 127.0.0.1, not {host!r}")
    return _real_connect(self, address)


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fence off the outside world: any connection to a non-loopback host fails the test."""
    monkeypatch.setattr(socket.socket, "connect", _guarded_connect)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def fresh_probes() -> Iterator[None]:
    probes.reset()
    yield
    probes.reset()


@dataclass
class RunningRanch:
    """A ranch app served on 127.0.0.1 by uvicorn in a thread."""

    url: str
    config: RanchConfig
    server: ServerThread
    database_url: str

    def agent_url(self, agent_id: str) -> str:
        return f"{self.url}/a2a/agents/{agent_id}"


@contextlib.contextmanager
def serve_ranch(config: str | RanchConfig, database: Path, **settings: Any) -> Iterator[RunningRanch]:
    """Serve `config` (YAML text or a parsed config) with its tasks in the SQLite file `database`."""
    parsed = parse_config(config) if isinstance(config, str) else config
    database_url = f"sqlite+aiosqlite:///{database}"
    app = create_app(parsed, Settings(database_url=database_url, **settings))
    sock = bind_socket()
    with ServerThread(app, sock=sock, name="ranch") as server:
        yield RunningRanch(url=server.url, config=parsed, server=server, database_url=database_url)


# -- the official a2a-sdk client, as any outside caller would use it ------------------------------


@contextlib.asynccontextmanager
async def sdk_client(
    agent_url: str,
    *,
    binding: str = "JSONRPC",
    version: str = "1.0",
    streaming: bool = False,
    send_version_header: bool = True,
    extensions: list[str] | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Client]:
    """An a2a-sdk `Client` for one ranch agent, resolved from its card like any A2A caller.

    `version="0.3"` keeps only the card's 0.3 interfaces, so the SDK picks its 0.3 compat
    transport; `send_version_header=False` strips `A2A-Version` from every request (the
    server must then treat it as 0.3). `extensions` go in the `A2A-Extensions` header;
    `headers` go with every request (an API key).
    """

    async def strip_version(request: httpx.Request) -> None:
        if not send_version_header:
            request.headers.pop("A2A-Version", None)
            request.headers.pop("a2a-version", None)

    sent = dict(headers or {})
    if extensions:
        sent["A2A-Extensions"] = ",".join(extensions)
    async with httpx.AsyncClient(timeout=30, headers=sent, event_hooks={"request": [strip_version]}) as http:
        card = await A2ACardResolver(http, agent_url).get_agent_card()
        keep = [
            i
            for i in card.supported_interfaces
            if i.protocol_version == version and i.protocol_binding == binding
        ]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)
        config = ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding])
        client = ClientFactory(config).create(card)
        yield client


def user_message(
    text: str, *, context_id: str = "", task_id: str = "", metadata: dict[str, Any] | None = None
) -> Message:
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        task_id=task_id,
        parts=[Part(text=text)],
    )
    if metadata:
        message.metadata.update(metadata)
    return message


async def send(client: Client, message: Message) -> list[StreamResponse]:
    """Every stream response the client yields for one SendMessage (one, unless streaming)."""
    return [response async for response in client.send_message(SendMessageRequest(message=message))]


def trail_of(task: Task) -> list[dict[str, Any]]:
    """The trail in a team task's metadata (docs/routing.md section 3)."""
    data = MessageToDict(task.metadata).get(URI, {})
    return list(data.get("trail", []))
