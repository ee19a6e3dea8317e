"""Malformed and random requests to both A2A bindings and /mcp of a real server: no 5xx, every error
well-formed, in the entry's own format.

Bounded: a fixed number of derandomized examples per property (`make fuzz` runs them long and
random, see fuzzkit); 127.0.0.1 only. Inputs that once failed are explicit `@example`s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from _support.fuzzkit import fuzzing, json_values, nested
from _support.hubkit import RunningRanch, serve_ranch

EXAMPLES = 100
CONFIG = "agents:\n  - {id: echo, kind: echo}\n"
METHODS = [
    "SendMessage",
    "SendStreamingMessage",
    "GetTask",
    "ListTasks",
    "CancelTask",
    "SubscribeToTask",
    "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfig",
    "GetExtendedAgentCard",
    "message/send",
    "tasks/get",
    "nope",
]

parts = st.lists(
    st.fixed_dictionaries(
        {},
        optional={
            "text": st.text(max_size=30) | json_values,
            "data": json_values,
            "url": st.text(max_size=20),
            "raw": st.text(max_size=12),
            "kind": st.sampled_from(["text", "data", "file", "x"]),
            "metadata": json_values,
        },
    ),
    max_size=3,
)
messages = st.fixed_dictionaries(
    {},
    optional={
        "role": st.sampled_from(["ROLE_USER", "ROLE_AGENT", "user", "agent", "", "ROLE_X"]) | json_values,
        "messageId": st.text(max_size=12) | json_values,
        "parts": parts | json_values,
        "metadata": json_values,
        "contextId": st.text(max_size=12) | json_values,
        "taskId": st.text(max_size=12),
        "kind": st.just("message"),
        "extensions": st.lists(st.text(max_size=10), max_size=2),
    },
)
params = (
    json_values
    | st.fixed_dictionaries(
        {"message": messages}, optional={"configuration": json_values, "metadata": json_values}
    )
    | st.fixed_dictionaries(
        {},
        optional={
            "id": st.text(max_size=10) | json_values,
            "taskId": st.text(max_size=10),
            "historyLength": st.integers(-5, 10**12) | json_values,
            "pageSize": st.integers(-5, 10**6),
            "url": st.sampled_from(["http://127.0.0.1:1/x", "ftp://x", "http://169.254.169.254/", ""]),
        },
    )
)
envelopes = st.fixed_dictionaries(
    {"method": st.sampled_from(METHODS) | st.text(max_size=12)},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", ""]) | json_values,
        "id": st.integers() | st.text(max_size=8) | json_values,
        "params": params,
    },
)
bodies = (
    envelopes.map(lambda e: json.dumps(e).encode())
    | st.binary(max_size=120)
    | json_values.map(lambda v: json.dumps(v).encode())
)
versions = st.sampled_from([None, "1.0", "0.3", "2.0", "1", "x"])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    database: Path = tmp_path_factory.mktemp("fuzz") / "t.db"
    with serve_ranch(CONFIG, database, caller_rate=None, agent_rate=None, max_body_bytes=4096) as running:
        yield running


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=5, trust_env=False) as client:
        yield client


def _send(http: httpx.Client, method: str, url: str, body: bytes, version: str | None) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if version is not None:
        headers["A2A-Version"] = version
    return http.request(method, url, content=body if method != "GET" else None, headers=headers)


def _check_jsonrpc_payload(payload: Any, where: str) -> None:
    assert isinstance(payload, dict) and payload.get("jsonrpc") == "2.0", where
    assert ("result" in payload) != ("error" in payload), where
    if "error" in payload:
        error = payload["error"]
        assert isinstance(error["code"], int) and isinstance(error["message"], str) and error["message"], (
            where
        )
        assert error["code"] != -32603, where  # an internal error is never the answer to bad input


def _frames(response: httpx.Response) -> list[Any]:
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


def _message(metadata: str = "{}", role: str = "ROLE_USER") -> str:
    return f'{{"role":"{role}","messageId":"m1","parts":[{{"text":"hi"}}],"metadata":{metadata}}}'


NOT_UTF8 = b"\xff\xfe{}"
DEEP_SEND = f'{{"message":{_message(nested(1000))}}}'.encode()
"""A message whose metadata nests 1,000 levels (Python's JSON parser recurses past its limit)."""
FAR_FUTURE = "statusTimestampAfter=9999-12-31T23:59:59Z"
"""A valid timestamp past what nanoseconds in 64 bits hold (2262)."""


@fuzzing(EXAMPLES)
@given(body=bodies, version=versions, agent=st.sampled_from(["echo", "nope"]))
@example(body=NOT_UTF8, version=None, agent="echo")
@example(
    body=(
        b'{"jsonrpc":"2.0","id":1,"method":"message/send","params":'
        + f'{{"message":{_message(nested(1000)).replace("ROLE_USER", "user")}}}}}'.encode()
    ),
    version=None,
    agent="echo",
)
@example(
    body=b'{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"statusTimestampAfter":"9999-12-31T23:59:59Z"}}',
    version="1.0",
    agent="echo",
)
def test_jsonrpc_binding(
    server: RunningRanch, http: httpx.Client, body: bytes, version: str | None, agent: str
) -> None:
    response = _send(http, "POST", server.agent_url(agent), body, version)
    where = f"{response.status_code} {response.text[:300]} for {body[:200]!r} A2A-Version={version}"
    assert response.status_code < 500, where
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        for frame in _frames(response):
            _check_jsonrpc_payload(frame, where)
        return
    _check_jsonrpc_payload(response.json(), where)


REST_PATHS = [
    "message:send",
    "message:stream",
    "tasks",
    "tasks/t-1",
    "tasks/t-1:cancel",
    "tasks/t-1:subscribe",
    "tasks/t-1/pushNotificationConfigs",
    "tasks/t-1/pushNotificationConfigs/c1",
    "extendedAgentCard",
    # A2A 0.3
    "v1/message:send",
    "v1/message:stream",
    "v1/tasks/t-1",
    "v1/tasks/t-1:cancel",
    "v1/tasks/t-1:subscribe",
    "v1/tasks/t-1/pushNotificationConfigs",
    "v1/card",
]


@fuzzing(EXAMPLES)
@given(
    body=bodies
    | st.fixed_dictionaries({"message": messages}, optional={"configuration": json_values}).map(
        lambda v: json.dumps(v).encode()
    ),
    version=versions,
    agent=st.sampled_from(["echo", "nope"]),
    path=st.sampled_from(REST_PATHS),
    method=st.sampled_from(["GET", "POST", "DELETE"]),
)
@example(body=b"\x80", version="1.0", agent="echo", path="message:send", method="POST")
@example(body=NOT_UTF8, version="1.0", agent="echo", path="message:stream", method="POST")
@example(body=NOT_UTF8, version=None, agent="echo", path="v1/message:send", method="POST")
@example(body=NOT_UTF8, version=None, agent="echo", path="v1/message:stream", method="POST")
@example(body=DEEP_SEND, version="1.0", agent="echo", path="message:send", method="POST")
@example(body=DEEP_SEND, version=None, agent="echo", path="v1/message:stream", method="POST")
@example(body=b"", version="1.0", agent="echo", path=f"tasks?{FAR_FUTURE}", method="GET")
@example(body=b"", version=None, agent="echo", path="v1/tasks/t-1?historyLength=abc", method="GET")
def test_http_json_binding(
    server: RunningRanch,
    http: httpx.Client,
    body: bytes,
    version: str | None,
    agent: str,
    path: str,
    method: str,
) -> None:
    response = _send(http, method, f"{server.agent_url(agent)}/{path}", body, version)
    where = f"{method} {path}: {response.status_code} {response.text[:300]} for {body[:200]!r} v={version}"
    assert response.status_code < 500, where
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        assert response.status_code == 200, where
        return
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["code"] == response.status_code, where
        assert isinstance(error["message"], str) and error["message"], where


MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


@fuzzing(EXAMPLES // 2)
@given(body=bodies)
@example(body=NOT_UTF8)
@example(body=f'{{"jsonrpc":"2.0","id":1,"method":"ping","params":{nested(1000)}}}'.encode())
def test_mcp_endpoint(server: RunningRanch, http: httpx.Client, body: bytes) -> None:
    response = http.post(f"{server.url}/mcp", content=body, headers=MCP_HEADERS)
    where = f"{response.status_code} {response.text[:300]} for {body[:200]!r}"
    assert response.status_code < 500, where
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["code"], int) and error["message"], where
