"""The exporter's connection to the collector (`observe.collector`): kept open between exports,
made again when the collector closed it, over TLS for an `https` endpoint, and failing clearly.

Each test runs a real HTTP/1.1 server on 127.0.0.1 (a few lines over a socket, so each can count
its connections or misbehave on purpose) and POSTs to it.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from _support.hubkit import eventually
from ranch.observe.collector import Collector, CollectorError

HEADERS = {"Content-Type": "application/x-protobuf"}
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


@dataclass
class Peer:
    """What the server saw: connections accepted, request bodies read."""

    url: str
    connections: int = 0
    closed: int = 0
    """Connections the server has closed (its socket shut, the client told)."""
    bodies: list[bytes] = field(default_factory=list)


def _read_request(stream: socket.socket) -> bytes | None:
    """One request's body off `stream` (Content-Length framed); None once the client closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = stream.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += stream.recv(65536)
    return body


@contextmanager
def serving(
    answer: Callable[[Peer, socket.socket, bytes], bool], tls: ssl.SSLContext | None = None
) -> Iterator[Peer]:
    """A server answering each request with `answer(peer, connection, body)`, which returns whether
    to keep the connection for another request."""
    listener = socket.create_server(("127.0.0.1", 0))
    peer = Peer(f"{'https' if tls else 'http'}://localhost:{listener.getsockname()[1]}/v1/traces")

    def one(connection: socket.socket) -> None:
        try:
            with connection:
                while (body := _read_request(connection)) is not None:
                    peer.bodies.append(body)
                    if not answer(peer, connection, body):
                        return
        finally:
            peer.closed += 1

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            peer.connections += 1
            if tls is not None:
                try:
                    connection = tls.wrap_socket(connection, server_side=True)
                except (OSError, ssl.SSLError):
                    connection.close()
                    continue
            threading.Thread(target=one, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield peer
    finally:
        listener.close()


def keep_alive(peer: Peer, connection: socket.socket, body: bytes) -> bool:
    connection.sendall(OK)
    return True


def test_exports_share_one_kept_connection() -> None:
    async def post_three(url: str) -> list[int]:
        collector = Collector(url, HEADERS, timeout=5)
        statuses = [await collector.post(f"batch {n}".encode()) for n in range(3)]
        collector.close()
        return statuses

    with serving(keep_alive) as peer:
        assert asyncio.run(post_three(peer.url)) == [200, 200, 200]
    assert peer.connections == 1 and peer.bodies == [b"batch 0", b"batch 1", b"batch 2"]


def test_a_connection_the_collector_closed_is_made_again() -> None:
    """Once when the collector says `Connection: close`, once when it drops an idle connection."""

    def close_after_each(peer: Peer, connection: socket.socket, body: bytes) -> bool:
        if body == b"say close":
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        else:
            connection.sendall(OK)  # ...and drops it without a word: the next export finds it closed
        return False

    async def post(peer: Peer) -> list[int]:
        collector = Collector(peer.url, HEADERS, timeout=5)
        statuses = [await collector.post(b"say close"), await collector.post(b"drop it")]
        await eventually(lambda: peer.closed == 2, what="the server dropping the idle connection")
        statuses.append(await collector.post(b"after the drop"))
        collector.close()
        return statuses

    with serving(close_after_each) as peer:
        assert asyncio.run(post(peer)) == [200, 200, 200]
    assert peer.bodies == [b"say close", b"drop it", b"after the drop"] and peer.connections == 3


def test_failures_are_named() -> None:
    def garbage(peer: Peer, connection: socket.socket, body: bytes) -> bool:
        connection.sendall(b"this is not HTTP\r\n\r\n")
        return False

    def silent(peer: Peer, connection: socket.socket, body: bytes) -> bool:
        threading.Event().wait(5)
        return False

    async def post(url: str, limit: float = 5) -> int:
        return await Collector(url, HEADERS, timeout=limit).post(b"spans")

    with serving(garbage) as peer, pytest.raises(CollectorError):
        asyncio.run(post(peer.url))
    with serving(silent) as peer, pytest.raises(TimeoutError):
        asyncio.run(post(peer.url, limit=0.3))
    closed = socket.create_server(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    with pytest.raises(CollectorError, match=f"cannot connect to 127.0.0.1:{port}"):
        asyncio.run(post(f"http://127.0.0.1:{port}/v1/traces"))
    with pytest.raises(ValueError, match="not an http"):
        Collector("grpc://127.0.0.1:4317", HEADERS, timeout=1)


def test_an_https_collector_is_reached_over_tls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the collector's certificate trusted (SSL_CERT_FILE, as for any Python client)."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))

    async def post(url: str) -> int:
        collector = Collector(url, HEADERS, timeout=5)
        try:
            return await collector.post(b"secret spans")
        finally:
            collector.close()

    with serving(keep_alive, tls=server) as peer:
        assert asyncio.run(post(peer.url)) == 200
    assert peer.bodies == [b"secret spans"]
    monkeypatch.delenv("SSL_CERT_FILE")
    with (
        serving(keep_alive, tls=server) as peer,
        pytest.raises(CollectorError, match="CERTIFICATE_VERIFY_FAILED"),
    ):
        asyncio.run(post(peer.url))  # an untrusted certificate is refused
