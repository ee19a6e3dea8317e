"""`edge/coalesce.py` against plain uvicorn: the same app behind uvicorn's own httptools protocol and
behind ranch's gathering one answers the same bytes (the `date` header aside) to pipelined requests,
a chunked streamed response, `Expect: 100-continue` and a WebSocket upgrade. pyproject.toml pins
uvicorn below its next minor release because of that subclass: raise the pin with this test passing."""

from __future__ import annotations

import base64
import os
import re
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from functools import partial

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocket

from _support.servers import ServerThread
from ranch.edge.coalesce import GatheringHttpToolsProtocol
from ranch.edge.connections import ConnectionLimits

DATE = re.compile(rb"\r\ndate: [^\r]*", re.IGNORECASE)


async def plain(_request: Request) -> Response:
    return PlainTextResponse("hello")


async def echo(request: Request) -> Response:
    return Response(await request.body(), media_type="application/octet-stream")


async def stream(_request: Request) -> Response:
    async def chunks() -> AsyncIterator[bytes]:
        for number in range(3):
            yield f"chunk {number}\n".encode()

    return StreamingResponse(chunks(), media_type="text/plain")


async def ws_echo(websocket: WebSocket) -> None:
    await websocket.accept()
    await websocket.send_text(f"echo {await websocket.receive_text()}")
    await websocket.close()


APP = Starlette(
    routes=[
        Route("/plain", plain),
        Route("/echo", echo, methods=["POST"]),
        Route("/stream", stream),
        WebSocketRoute("/ws", ws_echo),
    ]
)


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, ServerThread]]:
    """uvicorn with its own httptools protocol, and with ranch's (`ranch serve`'s default)."""
    started: dict[str, ServerThread] = {}
    protocols: dict[str, object] = {
        "uvicorn": "httptools",
        "ranch": partial(GatheringHttpToolsProtocol, limits=ConnectionLimits()),
    }
    try:
        for name, protocol in protocols.items():
            server = ServerThread(APP, name=name)
            server.server.config.http = protocol  # type: ignore[assignment]
            started[name] = server.start()
        yield started
    finally:
        for server in started.values():
            server.stop()


def exchange(port: int, talk: Callable[[socket.socket], bytes]) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        return DATE.sub(b"", talk(sock))


def read_until(sock: socket.socket, done: Callable[[bytes], bool]) -> bytes:
    """What the server sends until `done` holds of it (or it closes); at most 10 s."""
    got = b""
    deadline = time.monotonic() + 10
    while not done(got) and time.monotonic() < deadline:
        data = sock.recv(65536)
        if not data:
            break
        got += data
    return got


def to_the_end(sock: socket.socket) -> bytes:
    return read_until(sock, lambda _got: False)


def both(servers: dict[str, ServerThread], talk: Callable[[socket.socket], bytes]) -> bytes:
    theirs = exchange(servers["uvicorn"].port, talk)
    ours = exchange(servers["ranch"].port, talk)
    assert ours == theirs
    return ours


def test_pipelined_requests_get_the_same_answers_in_order(servers: dict[str, ServerThread]) -> None:
    def talk(sock: socket.socket) -> bytes:
        sock.sendall(
            b"GET /plain HTTP/1.1\r\nhost: t\r\n\r\n"
            b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 4\r\n\r\nping"
            b"GET /stream HTTP/1.1\r\nhost: t\r\n\r\n"
            b"GET /plain HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n"
        )
        return to_the_end(sock)

    answers = both(servers, talk)
    assert answers.count(b"HTTP/1.1 200 OK") == 4
    assert answers.index(b"hello") < answers.index(b"ping") < answers.index(b"chunk 0")


def test_a_streamed_response_is_chunked_the_same(servers: dict[str, ServerThread]) -> None:
    def talk(sock: socket.socket) -> bytes:
        sock.sendall(b"GET /stream HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        return to_the_end(sock)

    answer = both(servers, talk)
    assert b"transfer-encoding: chunked" in answer and answer.endswith(b"0\r\n\r\n")


def test_expect_100_continue_is_answered_before_the_body(servers: dict[str, ServerThread]) -> None:
    def talk(sock: socket.socket) -> bytes:
        sock.sendall(
            b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 5\r\nexpect: 100-continue\r\n"
            b"connection: close\r\n\r\n"
        )
        interim = read_until(sock, lambda got: got.endswith(b"\r\n\r\n"))
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(b"hello")
        return interim + to_the_end(sock)

    assert both(servers, talk).endswith(b"\r\n\r\nhello")


def test_a_websocket_upgrade_and_its_frames_are_the_same(servers: dict[str, ServerThread]) -> None:
    key = base64.b64encode(os.urandom(16))

    def talk(sock: socket.socket) -> bytes:
        sock.sendall(
            b"GET /ws HTTP/1.1\r\nhost: t\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
            b"sec-websocket-key: " + key + b"\r\nsec-websocket-version: 13\r\n\r\n"
        )
        handshake = read_until(sock, lambda got: b"\r\n\r\n" in got)
        mask = b"\x01\x02\x03\x04"
        payload = bytes(byte ^ mask[index % 4] for index, byte in enumerate(b"hi"))
        sock.sendall(b"\x81\x82" + mask + payload)  # a masked text frame, as a client sends it
        closed = b"\x88\x02\x03\xe8"  # the server's close frame, code 1000
        return handshake + read_until(sock, lambda got: b"echo hi" in got and got.endswith(closed))

    answer = both(servers, talk)
    assert answer.startswith(b"HTTP/1.1 101 Switching Protocols") and b"echo hi" in answer
