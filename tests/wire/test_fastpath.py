"""The fast path answers what the full stack would, and hands back whatever it does not serve.

A plain A2A 1.0 JSON-RPC call skips Starlette's stack (`ranch.wire.fastpath`); these
calls go to a real server on 127.0.0.1 and check the fast path's own duties (trace
ids, the body it already read handed on intact) and the requests it must leave to
the full stack (extension negotiation, chunked bodies, 0.3 names, unknown agents).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from _support.hubkit import RunningRanch, serve_ranch
from _support.sdk import as_json, user_message
from ranch.wire import client_routing

CONFIG = """
agents:
  - id: triage
    kind: rules
    rules:
      - {reply: "seen: {text}", route: user}
  - {id: echo, kind: echo}
"""
V1 = {"A2A-Version": "1.0"}


def _send(text: str, method: str = "SendMessage") -> dict[str, object]:
    message = as_json(user_message(text))
    return {"jsonrpc": "2.0", "id": "r-1", "method": method, "params": {"message": message}}


@pytest.fixture(scope="module")
def ranch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    folder = Path(tmp_path_factory.mktemp("fastpath"))
    with serve_ranch(CONFIG, folder / "t.db") as running:
        yield running


@pytest.fixture()
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=10, trust_env=False) as client:
        yield client


def test_trace_id_comes_from_traceparent_or_is_new(ranch: RunningRanch, http: httpx.Client) -> None:
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    headers = {**V1, "traceparent": f"00-{trace}-00f067aa0ba902b7-01"}
    traced = http.post(ranch.agent_url("echo"), json=_send("hi"), headers=headers)
    assert traced.status_code == 200 and traced.headers["x-trace-id"] == trace
    assert traced.json()["result"]["message"]["parts"] == [{"text": "hi"}]
    fresh = {
        http.post(ranch.agent_url("echo"), json=_send("hi"), headers=V1).headers["x-trace-id"]
        for _ in range(3)
    }
    assert len(fresh) == 3 and all(re.fullmatch("[0-9a-f]{32}", value) for value in fresh)


def test_a_chunked_body_takes_the_full_stack_and_is_answered(ranch: RunningRanch, http: httpx.Client) -> None:
    body = httpx.Request("POST", "/", json=_send("chunked")).content

    def chunks() -> Iterator[bytes]:  # no Content-Length: the request goes out chunked
        yield body[:10]
        yield body[10:]

    answer = http.post(
        ranch.agent_url("echo"), content=chunks(), headers={**V1, "Content-Type": "application/json"}
    )
    assert answer.status_code == 200
    assert answer.json()["result"]["message"]["parts"] == [{"text": "chunked"}]


def test_requested_extensions_are_negotiated_by_the_full_stack(
    ranch: RunningRanch, http: httpx.Client
) -> None:
    headers = {**V1, "A2A-Extensions": client_routing.URI}
    answer = http.post(ranch.agent_url("triage"), json=_send("route me"), headers=headers)
    assert answer.status_code == 200
    assert answer.headers["a2a-extensions"] == client_routing.URI  # the rules agent declares client routing
    assert answer.json()["result"]["message"]["parts"] == [{"text": "seen: route me"}]
    plain = http.post(ranch.agent_url("triage"), json=_send("route me"), headers=V1)
    assert "a2a-extensions" not in plain.headers  # nothing requested, nothing activated


def test_a_03_method_name_reaches_the_sdk_dispatcher_with_its_body(
    ranch: RunningRanch, http: httpx.Client
) -> None:
    """The fast path has read the body before it learns the method; the 0.3 adapter still gets it whole."""
    legacy = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "message/send",
        "params": {
            "message": {
                "role": "user",
                "kind": "message",
                "messageId": uuid.uuid4().hex,
                "parts": [{"kind": "text", "text": "old name"}],
            }
        },
    }
    answer = http.post(ranch.agent_url("echo"), json=legacy, headers=V1).json()
    # the SDK's own answer to a 0.3 name sent as 1.0, for the request id the body carried
    assert answer["id"] == 7 and "Expected version '0.3'" in answer["error"]["message"], answer


def test_unknown_agents_and_bad_bodies_get_clear_errors(ranch: RunningRanch, http: httpx.Client) -> None:
    unknown = http.post(ranch.agent_url("nobody"), json=_send("hi"), headers=V1)
    assert "echo" in unknown.text and "nobody" in unknown.text
    broken = http.post(
        ranch.agent_url("echo"), content=b"{not json", headers={**V1, "Content-Type": "application/json"}
    )
    error = broken.json()["error"]
    assert error["code"] == -32700 and "not valid JSON" in error["message"]
    assert broken.headers["x-trace-id"]
