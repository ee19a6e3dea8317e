"""Connections left open lose what the caller lost, at once and without waiting for its traffic.

A WebSocket subscribed to a room, and an A2A event stream following a task, are watched by clients
that send nothing more (`ranch watch`, `hub.events()`, a task subscriber). When the key they were
opened with is revoked or expires, they end with the authentication error (4401 on the
WebSocket); when the caller is removed from a room, that room's subscription ends with an error
frame naming it, and the room's later events never reach the socket.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from _support.hubkit import ADMIN_KEY, Api, Live, RunningRanch, serve_ranch
from _support.probes import SLEEPER

PROMPTLY = 5.0
"""Seconds within which an ended key or a lost room must reach an idle connection (the goal is 1 s;
the margin is for a loaded machine)."""


@pytest.fixture
def hub(database_url: str) -> Iterator[RunningRanch]:
    with serve_ranch(SLEEPER, database_url, auth="keys") as served:
        yield served


def acme(hub: RunningRanch) -> Api:
    owner = Api(hub.url, ADMIN_KEY).post("/organizations", {"id": "acme"})["owner"]["api_key"]
    return Api(hub.url, owner)


def member(owner: Api, user: str, rooms: list[str]) -> tuple[str, str]:
    """A member user `user` (its key and key id) taking part in `rooms`, which are made here."""
    created = owner.post("/users", {"id": user, "name": user})
    key = created["api_key"]
    for room in rooms:
        owner.post("/rooms", {"id": room, "title": room, "participants": [{"kind": "user", "id": user}]})
    key_id = Api(owner.base_url, key).get("/keys")["items"][0]["id"]
    return key, key_id


def texts(frames: list[dict[str, Any]]) -> list[str]:
    return [f["data"]["text"] for f in frames if f["type"] == "message.created"]


def test_a_revoked_key_ends_an_idle_websocket_at_once(hub: RunningRanch) -> None:
    owner = acme(hub)
    key, key_id = member(owner, "mia", ["r1"])
    live = Live(hub.url, key)
    try:
        room = "acme.r1"
        live.subscribe([room])
        owner.post(f"/rooms/{room}/messages", {"text": "before"})
        live.until(lambda f: f["type"] == "message.created")
        began = time.monotonic()
        owner.post(f"/keys/{key_id}/revoke", None, status=200)
        owner.post(f"/rooms/{room}/messages", {"text": "after revocation"})
        frames, code = live.until_closed(PROMPTLY)
        assert code == 4401
        assert time.monotonic() - began < PROMPTLY
        assert frames and frames[-1]["type"] == "error"
        assert frames[-1]["error"]["code"] == "UNAUTHENTICATED"
        assert "after revocation" not in texts(frames)
    finally:
        live.close()


def test_an_expiring_key_closes_its_idle_websocket_when_it_expires(hub: RunningRanch) -> None:
    owner = acme(hub)
    key, _ = member(owner, "mia", ["r1"])
    short = Api(hub.url, key).post("/keys", {"expires_in": 3})["api_key"]
    live = Live(hub.url, short)
    try:
        live.subscribe(["acme.r1"])
        frames, code = live.until_closed(3 + PROMPTLY)  # no frame sent, none to answer
        assert code == 4401
        assert frames[-1]["error"]["code"] == "UNAUTHENTICATED"
        assert "expired" in frames[-1]["error"]["message"]
    finally:
        live.close()


def test_a_removed_participant_stops_getting_the_rooms_events_but_keeps_its_other_rooms(
    hub: RunningRanch,
) -> None:
    owner = acme(hub)
    key, _ = member(owner, "mia", ["r1", "r2"])
    live = Live(hub.url, key)
    try:
        live.subscribe(["acme.r1", "acme.r2"])
        owner.call("DELETE", "/rooms/acme.r1/participants/user/acme.mia").raise_for_status()
        lost = live.until(lambda f: f["type"] == "error", timeout=PROMPTLY)[-1]
        assert lost["room_id"] == "acme.r1" and lost["error"]["code"] == "NOT_FOUND"
        assert "acme.r1" in lost["error"]["message"]
        owner.post("/rooms/acme.r1/messages", {"text": "after removal", "parts": [{"data": {"pay": 1}}]})
        owner.post("/rooms/acme.r2/messages", {"text": "still here"})
        frames = live.until(lambda f: f["type"] == "message.created")
        assert texts(frames) == ["still here"]
        assert all(f.get("room_id") != "acme.r1" for f in frames)
    finally:
        live.close()


# -- A2A event streams --------------------------------------------------------------------------


def started_task(hub: RunningRanch, key: str) -> str:
    """A task of the sleeper (it answers in a minute), started without waiting for it."""
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    params = {"message": message, "configuration": {"returnImmediately": True}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    answer = httpx.post(
        hub.agent_url("sleeper"), json=body, headers={"A2A-Version": "1.0", "X-API-Key": key}, timeout=30
    ).json()
    return str(answer["result"]["task"]["id"])


def cancel(hub: RunningRanch, key: str, task_id: str) -> None:
    """CancelTask: the sleeper stops (and its task lets go of what followed it)."""
    body = {"jsonrpc": "2.0", "id": 2, "method": "CancelTask", "params": {"id": task_id}}
    headers = {"A2A-Version": "1.0", "X-API-Key": key}
    answer = httpx.post(hub.agent_url("sleeper"), json=body, headers=headers, timeout=30).json()
    assert "result" in answer, answer


def sse_events(response: httpx.Response, timeout: float) -> Iterator[tuple[str, dict[str, Any]]]:
    """(event name, data) of each event, until the stream ends."""
    name = "message"
    deadline = time.monotonic() + timeout
    for line in response.iter_lines():
        assert time.monotonic() < deadline, "the stream did not end in time"
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            yield name, json.loads(line[5:])
            name = "message"


@pytest.mark.parametrize("binding", ["jsonrpc", "http+json"])
def test_a_revoked_key_ends_a_task_subscription_with_the_authentication_error(
    hub: RunningRanch, binding: str
) -> None:
    owner = acme(hub)
    created = owner.post("/keys", {})
    key, key_id = created["api_key"], created["key"]["id"]
    task_id = started_task(hub, key)
    headers = {"A2A-Version": "1.0", "X-API-Key": key}
    if binding == "jsonrpc":
        body = {"jsonrpc": "2.0", "id": 7, "method": "SubscribeToTask", "params": {"id": task_id}}
        request = httpx.Request("POST", hub.agent_url("sleeper"), json=body, headers=headers)
    else:
        request = httpx.Request(
            "GET", f"{hub.agent_url('sleeper')}/tasks/{task_id}:subscribe", headers=headers
        )
    with httpx.Client(timeout=PROMPTLY * 2) as client:
        response = client.send(request, stream=True)
        assert response.status_code == 200
        events = sse_events(response, timeout=PROMPTLY * 2)
        first = next(events)  # the task as it stands: the stream is open
        assert first[0] == "message"
        began = time.monotonic()
        owner.post(f"/keys/{key_id}/revoke", None, status=200)
        rest = list(events)
        response.close()
    cancel(hub, owner.headers["X-API-Key"], task_id)  # the owner's other key still works
    assert time.monotonic() - began < PROMPTLY
    assert len(rest) == 1, rest  # nothing but the error, which ends it
    name, error = rest[0]
    assert name == "error"
    if binding == "jsonrpc":
        assert error["id"] == 7, error  # the request's own, as every event of the stream
        assert "revoked" in error["error"]["message"]
    else:
        assert error["error"]["status"] == "UNAUTHENTICATED" and "revoked" in error["error"]["message"]


def streaming_turn(hub: RunningRanch, agent_id: str, key: str) -> httpx.Request:
    """SendStreamingMessage to `agent_id` as the holder of `key` (JSON-RPC, id 9)."""
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    body = {"jsonrpc": "2.0", "id": 9, "method": "SendStreamingMessage", "params": {"message": message}}
    headers = {"A2A-Version": "1.0", "X-API-Key": key}
    return httpx.Request("POST", hub.agent_url(agent_id), json=body, headers=headers)


def new_call_error(hub: RunningRanch, agent_id: str, key: str) -> dict[str, Any]:
    """What a new SendMessage to `agent_id` answers the holder of `key`: its JSON-RPC error."""
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    headers = {"A2A-Version": "1.0", "X-API-Key": key}
    error: dict[str, Any] = httpx.post(
        hub.agent_url(agent_id), json=body, headers=headers, timeout=30
    ).json()["error"]
    return error


def test_removing_an_agent_ends_the_event_streams_on_it_with_the_error_a_new_call_gets(
    hub: RunningRanch,
) -> None:
    """There is no way to change an agent's visibility (the REST API registers and removes agents):
    removal is what takes an agent away from its callers."""
    owner = acme(hub)
    key, _ = member(owner, "mia", [])
    team = {"id": "slow", "kind": "team", "members": ["sleeper"], "default_agent": "sleeper"}
    agent_id = owner.post("/agents", {**team, "visibility": "org"})["agent"]["id"]
    with httpx.Client(timeout=PROMPTLY * 2) as client:
        response = client.send(streaming_turn(hub, agent_id, key), stream=True)
        assert response.status_code == 200
        events = sse_events(response, timeout=PROMPTLY * 2)
        first = next(events)  # the task is under way: the stream is open
        assert first[0] == "message" and "result" in first[1], first
        began = time.monotonic()
        owner.call("DELETE", f"/agents/{agent_id}").raise_for_status()
        rest = list(events)
        response.close()
    assert time.monotonic() - began < PROMPTLY
    assert rest and rest[-1][0] == "error", rest
    ended = rest[-1][1]
    assert ended["id"] == 9, ended
    expected = new_call_error(hub, agent_id, key)
    assert ended["error"]["code"] == expected["code"], (ended, expected)
    assert f"'{agent_id}'" in ended["error"]["message"]
    assert all("error" not in data for _, data in rest[:-1]), rest  # nothing after the error, one error
