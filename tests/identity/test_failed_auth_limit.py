"""Refused API keys are rate-limited per client address, before any key is looked up.

On every entry (A2A JSON-RPC and HTTP+JSON, /mcp, REST, WebSocket): a burst of bad keys from one
address gets 401s, then 429 with Retry-After; a valid key from another address still works.
Two loopback addresses (127.0.0.1 and 127.0.0.2) play two clients.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from _support.hubkit import ADMIN_KEY, RunningRanch, serve_ranch

BURST = 5
CONFIG = """
agents:
  - {id: greeter, kind: echo}
"""
OTHER = "127.0.0.2"
"""A second client address: the whole 127/8 is loopback."""

Attempt = Callable[[RunningRanch, str, str], tuple[int, dict[str, str]]]
"""(server, key, client address) -> (HTTP status or WebSocket close code, response headers)."""


def _client(address: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=address), timeout=30)


def _send_params() -> dict[str, Any]:
    return {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


def a2a_jsonrpc(hub: RunningRanch, key: str, address: str) -> tuple[int, dict[str, str]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": _send_params()}
    with _client(address) as client:
        answer = client.post(
            hub.agent_url("greeter"), json=body, headers={"A2A-Version": "1.0", "X-API-Key": key}
        )
    return answer.status_code, dict(answer.headers)


def a2a_http_json(hub: RunningRanch, key: str, address: str) -> tuple[int, dict[str, str]]:
    with _client(address) as client:
        answer = client.post(
            f"{hub.agent_url('greeter')}/message:send",
            json=_send_params(),
            headers={"A2A-Version": "1.0", "Authorization": f"Bearer {key}"},
        )
    return answer.status_code, dict(answer.headers)


def mcp(hub: RunningRanch, key: str, address: str) -> tuple[int, dict[str, str]]:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"X-API-Key": key, "Accept": "application/json, text/event-stream"}
    with _client(address) as client:
        answer = client.post(f"{hub.url}/mcp", json=initialize, headers=headers)
    return answer.status_code, dict(answer.headers)


def rest(hub: RunningRanch, key: str, address: str) -> tuple[int, dict[str, str]]:
    with _client(address) as client:
        answer = client.get(f"{hub.url}/api/v1/me", headers={"X-API-Key": key})
    return answer.status_code, dict(answer.headers)


def websocket(hub: RunningRanch, key: str, address: str) -> tuple[int, dict[str, str]]:
    """The close code (4401 / 4429), with the error frame's retryAfter; 200 when a ping is answered."""
    url = hub.url.replace("http://", "ws://", 1) + f"/api/v1/ws?token={key}"
    retry: dict[str, str] = {}
    with connect(url, open_timeout=10, source_address=(address, 0)) as live:
        try:
            with contextlib.suppress(ConnectionClosed):  # a refused key: closed already, frames queued
                live.send(json.dumps({"type": "ping"}))
            while True:
                frame = json.loads(live.recv(timeout=10))  # frames sent before a close still arrive
                if frame["type"] == "pong":
                    return 200, {}
                if "retryAfter" in frame.get("error", {}):
                    retry = {"retry-after": str(frame["error"]["retryAfter"])}
        except ConnectionClosed as closed:
            return (closed.rcvd.code if closed.rcvd else 1006), retry


ENTRIES: dict[str, tuple[Attempt, int, int]] = {
    # entry: (attempt, refused, rate-limited)
    "a2a-jsonrpc": (a2a_jsonrpc, 401, 429),
    "a2a-http-json": (a2a_http_json, 401, 429),
    "mcp": (mcp, 401, 429),
    "rest": (rest, 401, 429),
    "websocket": (websocket, 4401, 4429),
}


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[RunningRanch]:
    database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    # a refill far slower than the test, so the counts below are exact
    settings: dict[str, Any] = {"auth_failure_burst": BURST, "auth_failure_rate": 0.001, "caller_rate": None}
    with serve_ranch(CONFIG, database, auth="keys", **settings) as served:
        yield served


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_a_burst_of_bad_keys_gets_429_and_another_address_still_gets_in(
    hub: RunningRanch, entry: str
) -> None:
    attempt, refused, limited = ENTRIES[entry]
    answers = [attempt(hub, f"rk_guess_{number}", "127.0.0.1") for number in range(BURST + 3)]
    assert [status for status, _ in answers] == [refused] * BURST + [limited] * 3
    assert int(answers[-1][1]["retry-after"]) >= 1

    # the address is refused before its key is even looked up: a valid key waits too
    assert attempt(hub, ADMIN_KEY, "127.0.0.1")[0] == limited
    # another address is not affected
    assert attempt(hub, ADMIN_KEY, OTHER)[0] == 200
    assert attempt(hub, "rk_guess_from_elsewhere", OTHER)[0] == refused


def test_a_missing_key_spends_nothing(hub: RunningRanch) -> None:
    for _ in range(BURST + 3):
        assert rest(hub, "", "127.0.0.1")[0] == 401
    assert rest(hub, ADMIN_KEY, "127.0.0.1")[0] == 200


def test_refused_keys_share_one_budget_across_entries(hub: RunningRanch) -> None:
    entries: list[Attempt] = [a2a_jsonrpc, a2a_http_json, mcp, rest, websocket]  # one refusal each
    for number, guess in enumerate(entries):
        guess(hub, f"rk_guess_{number}", "127.0.0.1")
    for attempt, _, limited in ENTRIES.values():
        assert attempt(hub, "rk_guess_again", "127.0.0.1")[0] == limited
