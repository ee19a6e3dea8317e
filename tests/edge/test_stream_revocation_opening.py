"""A key revoked while an event stream is opening ends it with the authentication error, never a 500.

An A2A stream's status line waits for its first event (`wire/streams.py`), so a member slow to
answer keeps the stream opening for as long as it takes. The key the request was let in with may
be revoked meanwhile: the stream is then refused with the binding's authentication error (401,
JSON-RPC with the request's id, or the HTTP+JSON error), and ends; what the member answers after
never reaches the caller. The member here blocks until the test has revoked the key, so the
revocation lands inside the opening on every run.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import anyio
import httpx
import pytest
from a2a.types import Message

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, serve_ranch
from ranch import Call, Event, reply

WAIT = 10.0
"""Seconds a step may take on a loaded machine before the test fails (each wait is on state)."""


@dataclass
class Opening:
    """A member's answer held open: released from the test's thread, on the server's loop."""

    loop: asyncio.AbstractEventLoop
    released: anyio.Event

    def release(self) -> None:
        self.loop.call_soon_threadsafe(self.released.set)


OPENINGS: list[Opening] = []
ENTERED = threading.Event()


class Blocker:
    """A member whose first event waits until the test releases it (`entry: <this module>:Blocker`)."""

    def __init__(self, agent_id: str, **options: object) -> None:
        self.name = agent_id

    async def run(self, message: Message, call: Call) -> AsyncIterator[Event]:
        opening = Opening(asyncio.get_running_loop(), anyio.Event())
        OPENINGS.append(opening)
        ENTERED.set()
        await opening.released.wait()
        yield reply(message, "opened too late")


CONFIG = f"""
agents:
  - id: blocker
    kind: python
    entry: {__name__}:Blocker
"""


@pytest.fixture
def hub(database_url: str) -> Iterator[RunningRanch]:
    OPENINGS.clear()
    ENTERED.clear()
    with serve_ranch(CONFIG, database_url, auth="keys") as served:
        try:
            yield served
        finally:
            release_all()


def release_all() -> None:
    """Let every member held open answer (a failed assertion never leaves one blocked)."""
    for opening in OPENINGS:
        opening.release()


@dataclass
class Answer:
    status: int
    content_type: str
    trace_id: str
    body: bytes


def acme_key(hub: RunningRanch) -> tuple[Api, str, str]:
    """An organization's owner, and a key it made (the key, its id): the owner revokes it."""
    owner = Api(hub.url, Api(hub.url, ADMIN_KEY).post("/organizations", {"id": "acme"})["owner"]["api_key"])
    created = owner.post("/keys", {})
    return owner, created["api_key"], created["key"]["id"]


def message_03() -> dict[str, object]:
    """A user's message as A2A 0.3 writes it."""
    return {
        "kind": "message",
        "messageId": uuid.uuid4().hex,
        "role": "user",
        "parts": [{"kind": "text", "text": "hi"}],
    }


def opening_stream(hub: RunningRanch, binding: str, key: str) -> httpx.Request:
    """SendStreamingMessage to the blocker as the holder of `key` (JSON-RPC id 9, or HTTP+JSON; the
    1.0 JSON-RPC call takes the fast path, which hands its stream over once its first event is ready)."""
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    headers = {"A2A-Version": "1.0", "X-API-Key": key}
    url = hub.agent_url("blocker")
    if binding == "http+json":
        return httpx.Request("POST", f"{url}/message:stream", json={"message": message}, headers=headers)
    if binding == "jsonrpc 0.3":  # the SDK's 0.3 dispatcher, through the full stack
        body = {"jsonrpc": "2.0", "id": 9, "method": "message/stream", "params": {"message": message_03()}}
        return httpx.Request("POST", url, json=body, headers={**headers, "A2A-Version": "0.3"})
    body = {"jsonrpc": "2.0", "id": 9, "method": "SendStreamingMessage", "params": {"message": message}}
    return httpx.Request("POST", url, json=body, headers=headers)


def answered(request: httpx.Request) -> Answer:
    """The whole answer, read until the stream ends."""
    with httpx.Client(timeout=WAIT) as client:
        response = client.send(request, stream=True)
        try:
            body = response.read()
        finally:
            response.close()
    headers = response.headers
    return Answer(response.status_code, headers.get("content-type", ""), headers.get("x-trace-id", ""), body)


@pytest.mark.parametrize("binding", ["jsonrpc", "http+json", "jsonrpc 0.3"])
def test_a_key_revoked_while_the_stream_opens_ends_it_with_the_authentication_error(
    hub: RunningRanch, binding: str
) -> None:
    owner, key, key_id = acme_key(hub)
    with ThreadPoolExecutor(1) as pool:
        stream: Future[Answer] = pool.submit(answered, opening_stream(hub, binding, key))
        try:
            assert ENTERED.wait(WAIT), "the member was never asked"
            assert not stream.done()  # the stream is opening: its status line waits for the member
            owner.post(f"/keys/{key_id}/revoke", None, status=200)
        finally:
            release_all()  # what the member answers now must not reach the revoked key
        answer = stream.result(WAIT)  # the stream ended
    assert answer.status == 401, answer
    assert answer.content_type.startswith("application/json"), answer
    assert answer.trace_id, answer  # as every answer of the server
    error = json.loads(answer.body)
    if binding != "http+json":
        assert error["id"] == 9, error  # the request's own
        assert "revoked" in error["error"]["message"], error
    else:
        assert error["error"]["status"] == "UNAUTHENTICATED" and "revoked" in error["error"]["message"]
    assert b"opened too late" not in answer.body


def test_an_answer_that_is_no_stream_is_sent_whole_though_the_key_ended_while_it_was_made(
    hub: RunningRanch,
) -> None:
    """Only a stream outlives its check: an A2A 0.3 `message/send` (the full stack registers every
    JSON-RPC call, which may stream) let in before the revocation gets its answer, as before."""
    owner, key, key_id = acme_key(hub)
    body = {"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {"message": message_03()}}
    headers = {"A2A-Version": "0.3", "X-API-Key": key}
    request = httpx.Request("POST", hub.agent_url("blocker"), json=body, headers=headers)
    with ThreadPoolExecutor(1) as pool:
        sent: Future[Answer] = pool.submit(answered, request)
        try:
            assert ENTERED.wait(WAIT), "the member was never asked"
            owner.post(f"/keys/{key_id}/revoke", None, status=200)
        finally:
            release_all()
        answer = sent.result(WAIT)
    assert answer.status == 200, answer
    assert b"opened too late" in answer.body, answer
