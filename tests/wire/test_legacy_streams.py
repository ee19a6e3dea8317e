"""A2A 0.3 streams, served by the a2a-sdk's 0.3 adapters: an error raised before the first event is
an error response (not a 200 cut short), and the extensions headers go with the stream.

0.3 callers (a2a-sdk 0.3.x, @a2a-js/sdk in 0.3 mode) name extensions in `X-A2A-Extensions`; a 0.3
server accepts and emits both names (docs/routing.md, section 5). Real server on 127.0.0.1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from _support.hubkit import RunningRanch, serve_ranch
from ranch.cli.demo import DEMO_YAML
from ranch.wire.client_routing import URI

TIMEOUT = 30
JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def ranch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with serve_ranch(DEMO_YAML, tmp_path_factory.mktemp("legacy") / "t.db") as running:
        yield running


def rest_message(text: str = "find papers on otters", role: str = "ROLE_USER") -> dict[str, Any]:
    """A SendMessageRequest in A2A 0.3's HTTP+JSON shape (`content`, not `parts`)."""
    return {"message": {"messageId": "m-1", "role": role, "content": [{"text": text}]}}


def rpc_stream(text: str = "find papers on otters") -> dict[str, Any]:
    """`message/stream` in A2A 0.3's JSON-RPC shape."""
    message = {
        "kind": "message",
        "role": "user",
        "messageId": "m-1",
        "parts": [{"kind": "text", "text": text}],
    }
    return {"jsonrpc": "2.0", "id": 3, "method": "message/stream", "params": {"message": message}}


def events(response: httpx.Response) -> list[Any]:
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


@pytest.mark.parametrize(
    "body",
    [
        b"{}",
        b"",
        b"[1]",
        json.dumps(rest_message(role="ROLE_AGENT")).encode(),
        b'{"message": {"content": 7}}',
    ],
    ids=["empty-object", "no-body", "not-an-object", "agent-role", "wrong-type"],
)
def test_an_invalid_03_stream_request_answers_400_not_a_cut_stream(ranch: RunningRanch, body: bytes) -> None:
    url = f"{ranch.agent_url('helpdesk')}/v1/message:stream"
    response = httpx.post(url, content=body, headers=JSON, timeout=TIMEOUT)
    assert response.status_code == 400, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == 400 and error["message"], error


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_subscribing_to_an_unknown_task_over_03_answers_404(ranch: RunningRanch, method: str) -> None:
    url = f"{ranch.agent_url('helpdesk')}/v1/tasks/no-such-task:subscribe"
    response = httpx.request(method, url, timeout=TIMEOUT)
    assert response.status_code == 404, (response.status_code, response.text)
    assert response.json()["error"]["status"] == "NOT_FOUND"


def test_a_valid_03_stream_still_streams(ranch: RunningRanch) -> None:
    url = f"{ranch.agent_url('helpdesk')}/v1/message:stream"
    response = httpx.post(url, json=rest_message(), headers=JSON, timeout=TIMEOUT)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert any("TASK_STATE_COMPLETED" in json.dumps(event) for event in events(response)), response.text


@pytest.mark.parametrize("header", ["X-A2A-Extensions", "A2A-Extensions"])
def test_03_streams_echo_the_activated_extensions_under_both_names(ranch: RunningRanch, header: str) -> None:
    asked = {**JSON, header: f"urn:unknown, {URI}"}
    team = ranch.agent_url("helpdesk")
    rest = httpx.post(f"{team}/v1/message:stream", json=rest_message(), headers=asked, timeout=TIMEOUT)
    rpc = httpx.post(team, json=rpc_stream(), headers=asked, timeout=TIMEOUT)
    plain = httpx.post(team, json={**rpc_stream(), "method": "message/send"}, headers=asked, timeout=TIMEOUT)
    for response in (rest, rpc, plain):
        assert response.status_code == 200, response.text
        assert response.headers.get("A2A-Extensions") == URI, response.headers
        assert response.headers.get("X-A2A-Extensions") == URI, response.headers
    assert events(rpc) and all("error" not in event for event in events(rpc)), rpc.text


def test_10_requests_get_only_the_current_header(ranch: RunningRanch) -> None:
    team = ranch.agent_url("helpdesk")
    body = {"message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "find papers"}]}}
    headers = {**JSON, "A2A-Version": "1.0", "A2A-Extensions": URI}
    response = httpx.post(f"{team}/message:stream", json=body, headers=headers, timeout=TIMEOUT)
    assert response.headers.get("A2A-Extensions") == URI and "X-A2A-Extensions" not in response.headers
    nothing = httpx.post(team, json=rpc_stream(), headers=JSON, timeout=TIMEOUT)
    assert "A2A-Extensions" not in nothing.headers and "X-A2A-Extensions" not in nothing.headers


def test_the_03_stream_start_waits_for_no_more_than_the_first_event(tmp_path: Path) -> None:
    """Held until the first event, a stream still sends that event as soon as it exists."""
    config = "agents:\n  - {id: echo, kind: echo}\n"
    with serve_ranch(config, tmp_path / "t.db") as running:
        url = f"{running.agent_url('echo')}/v1/message:stream"
        with httpx.stream("POST", url, json=rest_message("hello"), headers=JSON, timeout=TIMEOUT) as response:
            assert response.status_code == 200
            first = next(line for line in response.iter_lines() if line.startswith("data:"))
    assert "hello" in first
