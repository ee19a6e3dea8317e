"""Malformed and random requests to both A2A bindings of a real server: no 5xx, every error well-formed.

Bounded: a fixed number of examples per binding and a wall-clock budget; 127.0.0.1 only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import RunningRanch, serve_ranch
from fuzzkit import json_values

BUDGET_S = 8.0
"""Per test: after this many seconds, remaining examples are not sent."""
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


def _frames(response: httpx.Response) -> list[Any]:
    return [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]


START: dict[str, float] = {}


def _over_budget(name: str) -> bool:
    started = START.setdefault(name, time.monotonic())
    return time.monotonic() - started > BUDGET_S


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(body=bodies, version=versions, agent=st.sampled_from(["echo", "nope"]))
def test_jsonrpc_binding(
    server: RunningRanch, http: httpx.Client, body: bytes, version: str | None, agent: str
) -> None:
    if _over_budget("jsonrpc"):
        return
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
]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
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
def test_http_json_binding(
    server: RunningRanch,
    http: httpx.Client,
    body: bytes,
    version: str | None,
    agent: str,
    path: str,
    method: str,
) -> None:
    if _over_budget("http+json"):
        return
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
