"""What a client may hold of a `ranch serve`, over real sockets: a request head must arrive within
`--header-timeout`, a body must keep coming (`--body-timeout`), one address holds at most
`--max-connections-per-address` connections, and X-Forwarded-For is believed only from the
proxies `--forwarded-allow-ips` names (nobody by default, loopback included).

Clients take different loopback addresses (127.0.0.x) as their source, so "another client" is
another address, as it is to the server. Keep-alive, a stream and a WebSocket left idle longer
than the header timeout stay open: only what the client still owes is timed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import WebSocketException
from websockets.sync.client import connect

from _support import TESTS
from _support.hubkit import ADMIN_KEY, wait_until
from _support.servers import ServerProcess, free_port, ranch_serve_process
from _support.sockets import client_from, connect_from, read_to_end, refused_keys

CONFIG = """
agents:
  - id: echo
    kind: echo
  - id: sleeper
    kind: python
    entry: _support.probes:Probe
    options: {chunks: ["slept", " well"], chunk_pause: 2.5}
"""
HEAD_TIMEOUT = 1.0
BUDGET = 3
"""Refused keys an address may present (`--auth-failure-burst`); refilled too slowly to matter here."""
KEYS = ["--auth", "keys", "--auth-failure-burst", str(BUDGET), "--auth-failure-rate", "0.001"]
CLOSED_WITHIN = 15.0
"""Seconds a timed-out connection may take to be closed on a loaded machine (the timeout is 1 s)."""
HALF_SENT = b"GET /healthz HTTP/1.1\r\nHost: x\r\n"


def serve(folder: Path, *flags: str, name: str) -> ServerProcess:
    env = {"PYTHONPATH": str(TESTS)}  # the sleeper is a probe
    return ranch_serve_process(
        folder, CONFIG, "--caller-rate", "off", *flags, admin_key=ADMIN_KEY, name=name, env=env
    )


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Short timeouts, a cap of 60 per address, and no proxy trusted (the default)."""
    flags = ["--header-timeout", str(HEAD_TIMEOUT), "--body-timeout", str(HEAD_TIMEOUT)]
    flags += ["--max-connections-per-address", "60", *KEYS]
    with serve(tmp_path_factory.mktemp("guarded"), *flags, name="guarded") as server:
        yield server


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """Behind a proxy at 127.0.0.7, a cap of 5 per address, the default timeouts."""
    flags = ["--forwarded-allow-ips", "127.0.0.7", "--max-connections-per-address", "5", *KEYS]
    with serve(tmp_path_factory.mktemp("proxied"), *flags, name="proxied") as server:
        yield server


def test_half_sent_heads_are_closed_after_the_header_timeout_while_others_are_served(
    guarded: ServerProcess,
) -> None:
    half_sent = [connect_from("127.0.0.4", guarded.port) for _ in range(50)]
    silent = connect_from("127.0.0.4", guarded.port)
    for sock in half_sent:
        sock.sendall(HALF_SENT)
    with client_from("127.0.0.1") as client:
        assert client.get(f"{guarded.url}/healthz").status_code == 200  # served meanwhile
    answers = [read_to_end(sock, CLOSED_WITHIN) for sock in half_sent]
    assert [answer is not None and answer.startswith(b"HTTP/1.1 408 ") for answer in answers] == [True] * 50
    assert b"did not arrive within 1 s" in (answers[0] or b"")
    assert read_to_end(silent, CLOSED_WITHIN) == b""  # a connection that says nothing is closed too
    for sock in [*half_sent, silent]:
        sock.close()


def test_a_stalled_request_body_is_closed_after_the_body_timeout(guarded: ServerProcess) -> None:
    sock = connect_from("127.0.0.12", guarded.port)
    sent = time.monotonic()
    sock.sendall(
        b"POST /a2a/agents/echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'A2A-Version: 1.0\r\nContent-Length: 200\r\n\r\n{"jsonrpc": '
    )
    assert read_to_end(sock, CLOSED_WITHIN) is not None, "the stalled body's connection is still open"
    assert time.monotonic() - sent >= HEAD_TIMEOUT * 0.9  # closed by the body timeout, not at once
    sock.close()


def test_keep_alive_a_stream_and_a_websocket_idle_past_the_header_timeout_stay_open(
    guarded: ServerProcess,
) -> None:
    """The three idle spells at once, each on its own connection (each is a wait, not work)."""
    with ThreadPoolExecutor(3) as pool:
        spells = [pool.submit(idle, guarded) for idle in (_keep_alive, _quiet_stream, _quiet_websocket)]
        for spell in spells:
            spell.result()


def _keep_alive(guarded: ServerProcess) -> None:
    """A second request on the same connection after an idle spell longer than the timeout."""
    sock = connect_from("127.0.0.13", guarded.port)
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    sock.sendall(request)
    assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    time.sleep(HEAD_TIMEOUT * 1.6)  # the idle spell is the scenario: longer than the head timeout
    sock.sendall(request)
    sock.settimeout(10)
    assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
    sock.close()


def _quiet_stream(guarded: ServerProcess) -> None:
    """A stream whose agent is silent for 2.5 s between two events (the head timeout is 1 s) ends."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {
            "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        },
    }
    headers = {"A2A-Version": "1.0", "X-API-Key": ADMIN_KEY}
    events, arrived = [], []
    with (
        httpx.Client(timeout=30, trust_env=False) as client,
        client.stream("POST", f"{guarded.url}/a2a/agents/sleeper", json=body, headers=headers) as stream,
    ):
        assert stream.status_code == 200
        for line in stream.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
                arrived.append(time.monotonic())
    assert max(b - a for a, b in zip(arrived, arrived[1:], strict=False)) > HEAD_TIMEOUT * 1.5  # it was quiet
    assert "slept well" in json.dumps(events[-1]), events
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", events[-1]


def _quiet_websocket(guarded: ServerProcess) -> None:
    """A WebSocket quiet for twice the head timeout still answers."""
    url = guarded.url.replace("http://", "ws://", 1) + f"/api/v1/ws?token={ADMIN_KEY}"
    with connect(url, open_timeout=10) as live:
        time.sleep(HEAD_TIMEOUT * 2)
        live.send(json.dumps({"type": "ping"}))
        assert json.loads(live.recv(timeout=10))["type"] == "pong"


def test_an_address_over_its_connection_cap_is_closed_while_others_are_served(proxied: ServerProcess) -> None:
    hog = [connect_from("127.0.0.3", proxied.port) for _ in range(5)]
    over = connect_from("127.0.0.3", proxied.port)
    assert read_to_end(over, 5) == b"", "the sixth connection of one address is closed at once"
    with client_from("127.0.0.1") as client:
        assert client.get(f"{proxied.url}/healthz").status_code == 200
    # the trusted proxy carries many clients: it is not capped
    through_proxy = [connect_from("127.0.0.7", proxied.port) for _ in range(8)]
    for sock in through_proxy:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert all((read_to_end(sock, 10) or b"").startswith(b"HTTP/1.1 200 ") for sock in through_proxy)
    # once the address closes its connections (WebSockets included), it may open new ones
    for sock in [*hog, over, *through_proxy]:
        sock.close()
    for _round in range(3):  # 3 x 5 WebSockets: each one's end gives its place back
        wait_until(lambda: _websockets_from("127.0.0.3", proxied, 5), timeout=10, what="5 WebSockets")


def _websockets_from(source: str, server: ServerProcess, count: int) -> bool:
    """Whether `source` could open `count` WebSockets at once (all closed again before returning)."""
    url = server.url.replace("http://", "ws://", 1) + f"/api/v1/ws?token={ADMIN_KEY}"
    opened = []
    try:
        for _ in range(count):
            opened.append(connect(url, sock=connect_from(source, server.port), open_timeout=10))
        return True
    except (OSError, EOFError, WebSocketException):
        return False
    finally:
        for live in opened:
            live.close()


def test_a_direct_client_cannot_choose_its_address_with_x_forwarded_for(guarded: ServerProcess) -> None:
    forged = [f"203.0.113.{n}" for n in range(BUDGET + 2)]
    assert refused_keys(guarded.url, "127.0.0.5", forged) == [401] * BUDGET + [429] * 2
    # nor frame another: refused keys "from" 127.0.0.6 are counted against their sender
    assert refused_keys(guarded.url, "127.0.0.14", ["127.0.0.6"] * BUDGET) == [401] * BUDGET
    assert refused_keys(guarded.url, "127.0.0.6", ["x"], key=ADMIN_KEY) == [200]


def test_x_forwarded_for_is_believed_from_the_named_proxy_only(proxied: ServerProcess) -> None:
    client = ["198.51.100.1"] * (BUDGET + 1)
    assert refused_keys(proxied.url, "127.0.0.7", client) == [401] * BUDGET + [429]
    assert refused_keys(proxied.url, "127.0.0.7", ["198.51.100.2"], key=ADMIN_KEY) == [200]
    assert refused_keys(proxied.url, "127.0.0.7", ["198.51.100.2"]) == [401]  # its own budget
    # from an address that is not the proxy, the header is ignored: the peer's budget is spent
    forged = [f"198.51.100.{n}" for n in range(10, 10 + BUDGET + 1)]
    assert refused_keys(proxied.url, "127.0.0.10", forged) == [401] * BUDGET + [429]


def test_bad_connection_flags_stop_serve_naming_them(tmp_path: Path) -> None:
    for flags, named in (
        (["--forwarded-allow-ips", "10.0.0.5,proxy.internal"], "--forwarded-allow-ips"),
        (["--header-timeout", "0"], "--header-timeout 0"),
        (["--max-connections-per-address", "0"], "--max-connections-per-address 0"),
    ):
        command = [sys.executable, "-m", "ranch", "serve", "--port", str(free_port()), *flags]
        command += ["--db", f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"]
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode != 0
        assert named in done.stderr + done.stdout, done.stderr


def test_workers_guard_their_connections_and_ignore_forwarded_headers(tmp_path: Path) -> None:
    """`--workers 2` (Redis at 127.0.0.1:6379 is needed): the same guards in every worker."""
    flags = ["--workers", "2", "--header-timeout", str(HEAD_TIMEOUT), *KEYS]
    flags += [
        "--redis-url",
        "redis://127.0.0.1:6379/0",
        "--redis-prefix",
        f"ranch-test-{uuid.uuid4().hex[:8]}",
    ]
    with serve(tmp_path, *flags, name="workers") as server:
        wait_until(lambda: server.output().count("Application startup complete") == 2, timeout=60)
        half_sent = [connect_from("127.0.0.4", server.port) for _ in range(10)]
        for sock in half_sent:
            sock.sendall(HALF_SENT)
        answers = [read_to_end(sock, CLOSED_WITHIN) or b"" for sock in half_sent]
        assert all(answer.startswith(b"HTTP/1.1 408 ") for answer in answers), answers
        forged = [f"203.0.113.{n}" for n in range(BUDGET + 2)]
        assert (
            refused_keys(server.url, "127.0.0.5", forged) == [401] * BUDGET + [429] * 2
        )  # one budget, in Redis
        for sock in half_sent:
            sock.close()
