"""One guard chain before every road: keyed calls keep the fast path, refusals come in each binding's
format, and every entry shares the caller's rate bucket and the failed-authentication budget.

Real servers on 127.0.0.1; which road a call took is read from the app's `fast_answers` count.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _support.hubkit import ADMIN_KEY, RunningRanch, serve_ranch
from ranch.edge.app import EdgeApp

CONFIG = """
agents:
  - {id: echo, kind: echo}
"""
V1 = {"A2A-Version": "1.0"}
KEY = {"X-API-Key": ADMIN_KEY}


def message() -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}


def rpc(method: str = "SendMessage", params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params or {"message": message()}}


def app_of(hub: RunningRanch) -> EdgeApp:
    app = hub.server.server.config.app
    assert isinstance(app, EdgeApp)
    return app


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[RunningRanch]:
    database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    with serve_ranch(CONFIG, database, auth="keys", root="echo") as hub:
        yield hub


def test_a_keyed_send_message_takes_the_fast_path(keyed: RunningRanch) -> None:
    app = app_of(keyed)
    before = app.fast_answers
    with httpx.Client(timeout=30) as http:
        answer = http.post(keyed.agent_url("echo"), json=rpc(), headers={**V1, **KEY})
        assert answer.status_code == 200 and answer.json()["result"]["message"]["parts"] == [{"text": "hi"}]
        assert app.fast_answers == before + 1  # authenticated by the chain, answered without Starlette
        root = http.post(f"{keyed.url}/", json=rpc(), headers={**V1, "Authorization": f"Bearer {ADMIN_KEY}"})
        assert "result" in root.json() and app.fast_answers == before + 2  # `--root` too

        refused = http.post(keyed.agent_url("echo"), json=rpc(), headers=V1)
        assert refused.status_code == 401 and refused.json()["id"] == 7
        legacy = http.post(keyed.agent_url("echo"), json=rpc("message/send", _legacy_params()), headers=KEY)
        assert "result" in legacy.json(), legacy.text  # A2A 0.3: the SDK's dispatcher, same chain
        streamed = http.post(keyed.agent_url("echo"), json=rpc("SendStreamingMessage"), headers={**V1, **KEY})
        assert streamed.status_code == 200 and '"hi"' in streamed.text
    assert app.fast_answers == before + 3  # the stream was the fast path's; the refusal and 0.3 were not


def _legacy_params() -> dict[str, Any]:
    parts = [{"kind": "text", "text": "hi"}]
    return {"message": {"role": "user", "kind": "message", "messageId": uuid.uuid4().hex, "parts": parts}}


Shape = str
"""jsonrpc | a2a-rest | rest: the error format a binding answers in."""


def assert_refused(
    answer: httpx.Response, status: int, shape: Shape, code: str | int, request_id: int | None = 7
) -> None:
    assert answer.status_code == status, answer.text
    assert answer.headers["x-trace-id"], answer.headers
    body = answer.json()
    if shape == "jsonrpc":
        assert body["jsonrpc"] == "2.0" and body["id"] == request_id and body["error"]["code"] == code, body
    elif shape == "a2a-rest":
        assert body["error"]["code"] == status and body["error"]["status"] == code, body
    else:
        assert body["error"]["code"] == code and "field" in body["error"], body


def entries(hub: RunningRanch, agent: str = "echo") -> dict[str, tuple[str, str, dict[str, Any], Shape]]:
    """Each binding: (method, url, request keyword arguments, the error shape it answers in)."""
    url = hub.agent_url(agent)
    return {
        "jsonrpc-1.0": ("POST", url, {"json": rpc(), "headers": V1}, "jsonrpc"),
        "jsonrpc-0.3": ("POST", url, {"json": rpc("message/send", _legacy_params())}, "jsonrpc"),
        "http+json-1.0": (
            "POST", f"{url}/message:send", {"json": {"message": message()}, "headers": V1}, "a2a-rest"
        ),
        "http+json-0.3": ("GET", f"{url}/v1/tasks", {}, "a2a-rest"),
        "mcp": (
            "POST",
            f"{hub.url}/mcp",
            {"json": rpc("tools/list", {}), "headers": {"Accept": "application/json, text/event-stream"}},
            "jsonrpc",
        ),
        "rest": ("GET", f"{hub.url}/api/v1/me", {}, "rest"),
    }  # fmt: skip


def test_each_binding_answers_a_refusal_in_its_own_format(keyed: RunningRanch) -> None:
    unauthenticated: dict[str, str | int] = {
        "jsonrpc": -32061,
        "a2a-rest": "UNAUTHENTICATED",
        "rest": "UNAUTHENTICATED",
    }
    unknown: dict[str, str | int] = {"jsonrpc": -32050, "a2a-rest": "NOT_FOUND"}
    with httpx.Client(timeout=30) as http:
        for name, (method, url, kwargs, shape) in entries(keyed).items():
            answer = http.request(method, url, **kwargs)
            assert_refused(answer, 401, shape, unauthenticated[shape])
            assert "Bearer" in answer.headers["www-authenticate"], name
        for name, (method, url, kwargs, shape) in entries(keyed, agent="nobody").items():
            if name in ("mcp", "rest"):
                continue  # they name no agent
            headers = {**kwargs.pop("headers", {}), **KEY}
            answer = http.request(method, url, headers=headers, **kwargs)
            assert_refused(answer, 404, shape, unknown[shape])
            assert "known: echo" in answer.text, name
        card = http.get(f"{keyed.agent_url('nobody')}/.well-known/agent-card.json")
        assert_refused(card, 404, "a2a-rest", "NOT_FOUND")


def test_rate_limits_and_the_body_limit_answer_in_each_format(tmp_path: Path) -> None:
    limited: dict[str, str | int] = {
        "jsonrpc": -32060,
        "a2a-rest": "RESOURCE_EXHAUSTED",
        "rest": "RATE_LIMITED",
    }
    too_large: dict[str, str | int] = {
        "jsonrpc": -32600,
        "a2a-rest": "INVALID_ARGUMENT",
        "rest": "REQUEST_TOO_LARGE",
    }
    big = '{"text": "' + "x" * 3000 + '"}'
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'a.db'}", max_body_bytes=2000) as hub:
        with httpx.Client(timeout=30) as http:
            for method, url, kwargs, shape in entries(hub).values():
                if method == "POST":
                    headers = {**kwargs.get("headers", {}), **KEY}
                    oversized = http.post(url, headers=headers, content=big)
                    assert_refused(oversized, 413, shape, too_large[shape], request_id=None)  # body unread
            rooms = http.post(f"{hub.url}/api/v1/rooms", headers=KEY, content=big)
            assert_refused(rooms, 413, "rest", too_large["rest"])
    with serve_ranch(
        CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'b.db'}", caller_rate=0.001, caller_burst=1
    ) as hub:
        with httpx.Client(timeout=30) as http:
            for name, (method, url, kwargs, shape) in entries(hub).items():
                headers = {**kwargs.pop("headers", {}), **KEY}
                answers = [http.request(method, url, headers=headers, **kwargs) for _ in range(2)]
                assert_refused(answers[-1], 429, shape, limited[shape])  # one token per caller
                assert int(answers[-1].headers["retry-after"]) >= 1, name


def test_every_entry_spends_the_key_holders_one_bucket(tmp_path: Path) -> None:
    """REST, A2A (fast path) and /mcp calls with one key spend one bucket, named by the key's owner."""
    database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    with serve_ranch(CONFIG, database, caller_rate=0.001, caller_burst=3, auth="keys") as hub:
        with httpx.Client(timeout=30) as http:
            assert http.get(f"{hub.url}/api/v1/me", headers=KEY).status_code == 200
            me = http.get(f"{hub.url}/api/v1/me", headers=KEY).json()
            assert http.post(hub.agent_url("echo"), json=rpc(), headers={**V1, **KEY}).status_code == 200
            refused = http.post(hub.agent_url("echo"), json=rpc(), headers={**V1, **KEY})
            assert refused.status_code == 429
            assert f"caller:user:{me['id']}" in refused.json()["error"]["message"], refused.text
            # another caller (no key, on a public entry) has a bucket of its own
            assert http.get(f"{hub.url}/a2a/agents").status_code == 200


def test_the_failed_auth_limit_holds_on_the_fast_path(tmp_path: Path) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    settings: dict[str, Any] = {"auth_failure_burst": 2, "auth_failure_rate": 0.001, "caller_rate": None}
    with serve_ranch(CONFIG, database, auth="keys", **settings) as hub:
        app = app_of(hub)
        before = app.fast_answers
        with httpx.Client(timeout=30) as http:
            url = hub.agent_url("echo")
            guesses = [
                http.post(url, json=rpc(), headers={**V1, "X-API-Key": f"rk_guess_{n}"}) for n in range(3)
            ]
            assert [a.status_code for a in guesses] == [401, 401, 429]
            assert_refused(guesses[-1], 429, "jsonrpc", -32060)
            blocked = http.post(url, json=rpc(), headers={**V1, **KEY})  # before the key is looked up
            assert_refused(blocked, 429, "jsonrpc", -32060)
        assert app.fast_answers == before  # refused at the edge: no road was taken
        with httpx.Client(timeout=30, transport=httpx.HTTPTransport(local_address="127.0.0.2")) as other:
            assert other.post(url, json=rpc(), headers={**V1, **KEY}).status_code == 200
        assert app.fast_answers == before + 1
