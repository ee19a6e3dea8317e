"""The lean JSON-RPC binding answers exactly what the a2a-sdk's dispatcher answers.

Two ranch servers with the same config, one serving A2A 1.0 JSON-RPC through
ranch's lean binding and one through the SDK's `JsonRpcDispatcher`, get the same
hypothesis-generated requests (valid and broken). Success results must be equal
once generated ids, timestamps and timings are normalised; errors must carry the
same code. Bounded: 120 examples, each two local HTTP calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from _support.fuzzkit import fuzzing
from _support.hubkit import RunningRanch, serve_ranch
from ranch.config import parse_config

CONFIG = """
agents:
  - {id: echo, kind: echo}
  - id: triage
    kind: rules
    rules:
      - {match: "(?i)ping", reply: "pong: {text}", route: echo, reason: echo it}
      - {reply: "done: {text}", route: user}
teams:
  - {id: desk, members: [triage, echo], default_agent: triage, routes: {echo: user}}
"""
GENERATED = {"messageId", "contextId", "taskId", "id", "artifactId", "timestamp"}
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningRanch, RunningRanch]]:
    config = parse_config(CONFIG)
    folder = tmp_path_factory.mktemp("equivalence")
    with (
        serve_ranch(config, Path(folder) / "lean.db") as lean,
        serve_ranch(config, Path(folder) / "sdk.db", jsonrpc="sdk") as sdk,
    ):
        yield lean, sdk


def normalise(value: Any, names: dict[str, str]) -> Any:
    """Replace generated ids, timestamps and timings by stable placeholders, in order of appearance."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in GENERATED and isinstance(item, str):
                out[key] = names.setdefault(item, f"<{len(names)}>")
            elif key == "ms":
                out[key] = "<ms>"
            else:
                out[key] = normalise(item, names)
        return out
    if isinstance(value, list):
        return [normalise(item, names) for item in value]
    if isinstance(value, str):
        return UUID.sub(lambda m: names.setdefault(m.group(0), f"<{len(names)}>"), value)
    return value


text = st.text(max_size=12)
parts = st.lists(
    st.fixed_dictionaries({"text": st.sampled_from(["ping", "hello", "", "PING pong"]) | text})
    | st.fixed_dictionaries(
        {"data": st.dictionaries(st.text(min_size=1, max_size=4), st.integers(0, 9), max_size=2)}
    )
    | st.fixed_dictionaries({"url": st.just("https://example.invalid/a.txt")}),
    max_size=3,
)
messages = st.fixed_dictionaries(
    {"role": st.sampled_from(["ROLE_USER", "ROLE_AGENT"]), "parts": parts},
    optional={
        "messageId": st.sampled_from(["m-1", "m-2"]),
        "contextId": st.sampled_from(["c-1", "c-2", "not-a-room"]),
        "metadata": st.dictionaries(
            st.sampled_from(["a", "x-recipient"]), st.sampled_from(["echo", 1, None]), max_size=2
        ),
        "extensions": st.lists(st.sampled_from(["urn:a", "urn:b"]), max_size=2),
    },
)
send = st.fixed_dictionaries(
    {"method": st.just("SendMessage"), "params": st.fixed_dictionaries({"message": messages})}
)
reads = st.fixed_dictionaries(
    {
        "method": st.sampled_from(["GetTask", "CancelTask", "SubscribeToTask", "ListTasks"]),
        "params": st.fixed_dictionaries({}, optional={"id": text, "historyLength": st.integers(-2, 3)}),
    }
)
broken = st.fixed_dictionaries(
    {
        "method": st.sampled_from(
            ["Nope", "message/send", "", "GetExtendedAgentCard", "GetTaskPushNotificationConfig"]
        ),
        "params": st.none() | st.just([1]) | st.fixed_dictionaries({"id": text}),
    }
)
requests = st.tuples(
    st.sampled_from(["echo", "triage", "desk"]),
    send | reads | broken,
    st.sampled_from([1, "r-1", None, True]),
    st.sampled_from(["2.0", "2.0", "1.0", None]),
)


def call(server: RunningRanch, agent: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.agent_url(agent), json=body, headers={"A2A-Version": "1.0"}, timeout=10)


@fuzzing(120)
@given(requests)
def test_lean_binding_answers_as_the_sdk_dispatcher(
    servers: tuple[RunningRanch, RunningRanch], request: tuple[str, dict[str, Any], Any, Any]
) -> None:
    lean, sdk = servers
    agent, rpc, request_id, version = request
    body: dict[str, Any] = {"id": request_id, "method": rpc["method"]}
    if version is not None:
        body["jsonrpc"] = version
    if rpc["params"] is not None:
        body["params"] = rpc["params"]
    ours, theirs = call(lean, agent, body), call(sdk, agent, body)
    assert ours.status_code == theirs.status_code
    if ours.headers["content-type"].startswith("text/event-stream"):
        assert theirs.headers["content-type"].startswith("text/event-stream")
        return
    mine, reference = ours.json(), theirs.json()
    assert set(mine) == set(reference), (mine, reference)
    assert mine.get("id") == reference.get("id")
    if "error" in reference:
        assert mine["error"]["code"] == reference["error"]["code"], (mine, reference)
        assert mine["error"]["message"]
    else:
        assert normalise(mine["result"], {}) == normalise(reference["result"], {})
