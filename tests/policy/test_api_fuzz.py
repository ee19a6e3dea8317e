"""Malformed and random requests to the REST API and the WebSocket: no 5xx, no crash, every error well-formed.

Bounded: a fixed number of derandomized examples per property (`make fuzz` runs them long and
random, see fuzzkit); only 127.0.0.1. Inputs that once failed are explicit `@example`s.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from _support.fuzzkit import fuzzing, json_values, nested
from _support.hubkit import ADMIN_KEY, Api, Live, RunningRanch, serve_ranch

CONFIG = """
agents:
  - id: greeter
    kind: rules
    rules: [{reply: "hello {text}"}]
"""
PAST_INT64 = str(2**63)
"""A cursor one past what a signed 64-bit column holds."""

PATHS = [
    "/me",
    "/organizations",
    "/organizations/current",
    "/users",
    "/agents",
    "/agents/{id}",
    "/rooms",
    "/rooms/{room}",
    "/rooms/{room}/participants",
    "/rooms/{room}/participants/{kind}/{id}",
    "/rooms/{room}/messages",
    "/rooms/{room}/events",
    "/rooms/{room}/executions",
    "/executions/{id}",
    "/executions/{id}/task",
    "/executions/{id}/cancel",
    "/agent/messages/next",
    "/agent/messages/{id}/ack",
]

fields = st.sampled_from(
    [
        "text",
        "title",
        "id",
        "kind",
        "role",
        "type",
        "participants",
        "mentions",
        "metadata",
        "default_agent",
        "status",
        "url",
        "name",
        "allowed_agent_urls",
        "history_length",
    ]
)
bodies = st.one_of(
    st.dictionaries(fields, json_values, max_size=5).map(lambda d: json.dumps(d).encode()),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
)
segments = st.one_of(
    st.sampled_from(["fuzz", "greeter", "nope", "user", "agent", "0"]),
    st.text(
        alphabet=st.characters(exclude_categories=["Cs", "Cc"], exclude_characters="/?#%"),
        min_size=1,
        max_size=12,
    ),
)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    database = tmp_path_factory.mktemp("fuzz") / "hub.db"
    # the REST fuzz sends refused keys on purpose: without a failed-auth budget its count (which
    # the examples decide) cannot shut the WebSocket fuzz out; tests/edge tests that budget
    unlimited = {"caller_rate": None, "auth_failure_rate": None}
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{database}", **unlimited) as running:
        admin = Api(running.url, ADMIN_KEY)
        admin.post(
            "/rooms", {"id": "fuzz", "title": "Fuzz", "participants": [{"kind": "agent", "id": "greeter"}]}
        )
        yield running


def well_formed(response: httpx.Response) -> None:
    assert response.status_code < 500, (response.request.method, response.request.url, response.text)
    if response.status_code >= 400:
        error = response.json()["error"]
        assert isinstance(error["code"], str) and error["code"].isupper()
        assert isinstance(error["message"], str) and error["message"]
        assert "field" in error and (error["field"] is None or isinstance(error["field"], str))


def test_random_rest_requests_get_well_formed_answers(hub: RunningRanch) -> None:
    keys = [ADMIN_KEY, "", "rk_not_a_key"]
    deep = f'{{"text":"x","metadata":{nested(3000)}}}'.encode()
    big_history = json.dumps({"id": "big", "kind": "echo", "history_length": 2**63}).encode()

    @fuzzing(150)
    @given(
        method=st.sampled_from(["GET", "POST", "PATCH", "DELETE", "PUT"]),
        template=st.sampled_from(PATHS),
        room=st.sampled_from(["fuzz", "nope"]) | segments,
        ident=segments,
        kind=st.sampled_from(["user", "agent", "team"]) | segments,
        body=bodies,
        key=st.sampled_from(keys),
        query=st.dictionaries(
            st.sampled_from(["limit", "since", "cursor", "history_length"]), st.text(max_size=8), max_size=2
        ),
    )
    @example("POST", "/rooms/{room}/messages", "fuzz", "x", "user", deep, ADMIN_KEY, {})
    @example("POST", "/rooms", "fuzz", "x", "user", deep, ADMIN_KEY, {})
    @example("POST", "/agents", "fuzz", "x", "user", big_history, ADMIN_KEY, {})
    @example("GET", "/rooms/{room}/messages", "fuzz", "x", "user", b"", ADMIN_KEY, {"since": PAST_INT64})
    @example("GET", "/rooms/{room}/events", "fuzz", "x", "user", b"", ADMIN_KEY, {"since": PAST_INT64})
    def probe(
        method: str,
        template: str,
        room: str,
        ident: str,
        kind: str,
        body: bytes,
        key: str,
        query: dict[str, str],
    ) -> None:
        path = template.format(room=room, id=ident, kind=kind)
        headers = {"Content-Type": "application/json", **({"X-API-Key": key} if key else {})}
        response = httpx.request(
            method, f"{hub.url}/api/v1{path}", content=body, headers=headers, params=query, timeout=10
        )
        if response.status_code in (404, 405) and not response.headers.get("content-type", "").startswith(
            "application/json"
        ):
            pytest.fail(f"{method} {path}: a {response.status_code} without a JSON error body")
        well_formed(response)

    probe()
    assert httpx.get(f"{hub.url}/healthz", timeout=5).status_code == 200  # still serving


def test_random_websocket_frames_get_error_frames_and_the_socket_stays_up(hub: RunningRanch) -> None:
    live = Live(hub.url, ADMIN_KEY)

    @fuzzing(80)
    @given(
        frame=st.one_of(
            json_values.map(json.dumps),
            st.text(max_size=60),
            st.dictionaries(
                st.sampled_from(["type", "rooms", "cursor", "delivery_id"]), json_values, max_size=4
            ).map(json.dumps),
        )
    )
    @example(f'{{"type":"subscribe","rooms":["fuzz"],"cursor":{PAST_INT64}}}')
    @example("[" * 50_000 + "]" * 50_000)
    def probe(frame: str) -> None:
        live.send_raw(frame)
        reply: dict[str, Any] = live.recv(timeout=10)
        assert (
            reply["type"] in ("error", "pong", "subscribed", "unsubscribed", "acked") or "cursor" in reply
        ), reply
        if reply["type"] == "error":
            assert reply["error"]["code"].isupper() and reply["error"]["message"]

    probe()
    live.send({"type": "ping"})
    while (frame := live.recv(timeout=10))["type"] != "pong":
        assert frame["type"] != "error" or frame["error"]["code"], frame
    live.close()
