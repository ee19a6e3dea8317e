"""Smoke tests for the test peers: each behaves as documented when driven by the a2a-sdk client.

If these fail, interop tests built on `peers` would fail for the wrong reason, so the peers are
checked here against the official client first, over a real loopback socket.
"""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    InternalError,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from _support.peers import GARBAGE_BODY, ROUTING_URI, build_peer_app, running_peer
from _support.sdk import user_message
from _support.servers import ServerProcess, ServerThread, free_port

T = TypeVar("T")

TIMEOUT = 10.0
"""Upper bound for any one client round trip in these tests."""


def run(factory: Callable[[httpx.AsyncClient], Awaitable[T]]) -> T:
    """Run one async scenario with a fresh loopback-only HTTP client, bounded in time."""

    async def main() -> T:
        async with httpx.AsyncClient(trust_env=False, timeout=TIMEOUT) as http:
            return await asyncio.wait_for(factory(http), TIMEOUT)

    return asyncio.run(main())


async def connect(
    http: httpx.AsyncClient, url: str, *, binding: str = "JSONRPC", streaming: bool = False
) -> tuple[AgentCard, Client]:
    card = await A2ACardResolver(http, url).get_agent_card()
    config = ClientConfig(httpx_client=http, supported_protocol_bindings=[binding], streaming=streaming)
    return card, ClientFactory(config).create(card)


async def send(client: Client, message: Message, *, return_immediately: bool = False) -> list[StreamResponse]:
    request = SendMessageRequest(
        message=message, configuration=SendMessageConfiguration(return_immediately=return_immediately)
    )
    return [response async for response in client.send_message(request)]


def text_of(message: Message) -> str:
    return "".join(part.text for part in message.parts)


def only_task(responses: list[StreamResponse]) -> Task:
    assert len(responses) == 1 and responses[0].HasField("task"), responses
    return responses[0].task


# --------------------------------------------------------------------------- router


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_router_completes_with_a_routing_decision(binding: str) -> None:
    with running_peer("router", route_to="sender") as peer:

        async def scenario(http: httpx.AsyncClient) -> tuple[AgentCard, Task]:
            card, client = await connect(http, peer.url, binding=binding)
            return card, only_task(await send(client, user_message("hi")))

        card, task = run(scenario)

    assert [ext.uri for ext in card.capabilities.extensions] == [ROUTING_URI]
    assert card.capabilities.streaming
    assert [(i.protocol_binding, i.url) for i in card.supported_interfaces] == [
        ("JSONRPC", f"{peer.url}/"),
        ("HTTP+JSON", peer.url),
    ]
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    reply = task.status.message
    assert reply.role == Role.ROLE_AGENT
    assert text_of(reply) == "router saw: hi"
    assert MessageToDict(reply.metadata)[ROUTING_URI] == {"recipient": "sender", "reason": "peer decided"}
    assert list(reply.extensions) == [ROUTING_URI]

    # What reached the peer: the raw request, then the message the executor got.
    (post,) = peer.recorder.posts()
    assert post.path == ("/" if binding == "JSONRPC" else "/message:send")
    assert post.headers["content-type"].startswith("application/json")
    assert b'"hi"' in post.body
    if binding == "JSONRPC":
        assert post.json()["method"] == "SendMessage"
    (seen,) = peer.recorder.messages
    assert seen.text == "hi"
    assert seen.task_id == task.id and seen.context_id == task.context_id


def test_router_streams_and_records_metadata_and_extension_header() -> None:
    with running_peer("router") as peer:

        async def scenario(http: httpx.AsyncClient) -> list[StreamResponse]:
            http.headers["A2A-Extensions"] = ROUTING_URI
            _, client = await connect(http, peer.url, streaming=True)
            message = user_message("route me")
            message.metadata.update({ROUTING_URI: {"sender": "user", "agentCards": []}})
            message.extensions.append(ROUTING_URI)
            return await send(client, message)

        responses = run(scenario)

    last = responses[-1]
    assert last.HasField("status_update"), responses
    assert last.status_update.status.state == TaskState.TASK_STATE_COMPLETED
    decision = MessageToDict(last.status_update.status.message.metadata)[ROUTING_URI]
    assert decision == {"recipient": "user", "reason": "peer decided"}

    (seen,) = peer.recorder.messages
    assert seen.metadata == {ROUTING_URI: {"sender": "user", "agentCards": []}}
    assert seen.extensions == [ROUTING_URI]
    assert seen.requested_extensions == [ROUTING_URI]
    (post,) = peer.recorder.posts()
    assert post.headers["a2a-extensions"] == ROUTING_URI
    assert post.json()["method"] == "SendStreamingMessage"


# --------------------------------------------------------------------------- plain


def test_plain_answers_with_a_message_and_no_extension() -> None:
    with running_peer("plain") as peer:

        async def scenario(http: httpx.AsyncClient) -> tuple[AgentCard, list[StreamResponse]]:
            card, client = await connect(http, peer.url)
            return card, await send(client, user_message("hi"))

        card, responses = run(scenario)

    assert not card.capabilities.extensions
    (response,) = responses
    assert response.HasField("message"), response
    assert response.message.role == Role.ROLE_AGENT
    assert text_of(response.message) == "plain saw: hi"
    assert not response.message.task_id
    assert [m.text for m in peer.recorder.messages] == ["hi"]


# --------------------------------------------------------------------------- asker


def test_asker_round_trip_on_the_same_task() -> None:
    with running_peer("asker") as peer:

        async def scenario(http: httpx.AsyncClient) -> tuple[Task, Task]:
            _, client = await connect(http, peer.url)
            first = only_task(await send(client, user_message("hi")))
            follow_up = user_message("Ada", task_id=first.id, context_id=first.context_id)
            second = only_task(await send(client, follow_up))
            return first, second

        first, second = run(scenario)

    assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert text_of(first.status.message) == "What is your name?"
    assert second.id == first.id
    assert second.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(second.status.message) == "Hello, Ada!"
    assert [m.text for m in peer.recorder.messages] == ["hi", "Ada"]
    assert {m.task_id for m in peer.recorder.messages} == {first.id}


# --------------------------------------------------------------------------- slow


def test_slow_answers_after_its_delay() -> None:
    with running_peer("slow", delay=0.3) as peer:

        async def scenario(http: httpx.AsyncClient) -> Task:
            _, client = await connect(http, peer.url)
            return only_task(await send(client, user_message("hi")))

        started = time.monotonic()
        task = run(scenario)
        elapsed = time.monotonic() - started

    assert elapsed >= 0.3
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(task.status.message) == "slow saw: hi"


def test_slow_can_be_cancelled() -> None:
    with running_peer("slow") as peer:

        async def scenario(http: httpx.AsyncClient) -> tuple[Task, Task, Task]:
            _, client = await connect(http, peer.url)
            submitted = only_task(await send(client, user_message("hi"), return_immediately=True))
            cancelled = await client.cancel_task(CancelTaskRequest(id=submitted.id))
            stored = await client.get_task(GetTaskRequest(id=submitted.id))
            return submitted, cancelled, stored

        submitted, cancelled, stored = run(scenario)
        assert peer.recorder.wait_for_cancel() == [submitted.id]

    assert submitted.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
    assert stored.status.state == TaskState.TASK_STATE_CANCELED


def test_stopping_a_server_with_a_slow_task_in_flight_is_bounded() -> None:
    with running_peer("slow", delay=60) as peer:

        async def scenario(http: httpx.AsyncClient) -> Task:
            _, client = await connect(http, peer.url)
            return only_task(await send(client, user_message("hi"), return_immediately=True))

        run(scenario)
        started = time.monotonic()
    assert time.monotonic() - started < 10


# --------------------------------------------------------------------------- failing


@pytest.mark.parametrize("after_task", [False, True])
@pytest.mark.parametrize("streaming", [False, True])
def test_failing_surfaces_as_an_internal_error(after_task: bool, streaming: bool) -> None:
    with running_peer("failing", after_task=after_task, error="boom") as peer:

        async def scenario(http: httpx.AsyncClient) -> list[StreamResponse]:
            _, client = await connect(http, peer.url, streaming=streaming)
            return await send(client, user_message("hi"))

        with pytest.raises(InternalError, match="boom"):
            run(scenario)
    assert [m.text for m in peer.recorder.messages] == ["hi"]


def test_failing_over_rest_is_an_http_500() -> None:
    with running_peer("failing") as peer:

        async def scenario(http: httpx.AsyncClient) -> list[StreamResponse]:
            _, client = await connect(http, peer.url, binding="HTTP+JSON")
            return await send(client, user_message("hi"))

        with pytest.raises(A2AClientError, match="HTTP Error 500"):
            run(scenario)


# --------------------------------------------------------------------------- garbage


@pytest.mark.parametrize("streaming", [False, True])
def test_garbage_peer_has_a_valid_card_but_answers_nonsense(streaming: bool) -> None:
    with running_peer("garbage") as peer:

        async def scenario(http: httpx.AsyncClient) -> list[StreamResponse]:
            card, client = await connect(http, peer.url, streaming=streaming)
            assert card.supported_interfaces[0].url == f"{peer.url}/"
            raw = await http.post(f"{peer.url}/", content=b"{}")
            assert (raw.status_code, raw.content) == (200, GARBAGE_BODY)
            return await send(client, user_message("hi"))

        with pytest.raises(A2AClientError, match="JSON"):
            run(scenario)
    assert len(peer.recorder.posts()) == 2


# --------------------------------------------------------------------------- plumbing


def test_build_peer_app_on_an_explicit_port_and_recorder_sees_card_fetch() -> None:
    port = free_port()
    app, recorder = build_peer_app("plain", base_url=f"http://127.0.0.1:{port}")
    with ServerThread(app, port) as server:

        async def scenario(http: httpx.AsyncClient) -> dict[str, Any]:
            response = await http.get(f"{server.url}/.well-known/agent-card.json")
            response.raise_for_status()
            body: dict[str, Any] = response.json()
            return body

        card = run(scenario)
    assert card["supportedInterfaces"][0]["url"] == f"http://127.0.0.1:{port}/"
    assert [(r.method, r.path) for r in recorder.requests] == [("GET", "/.well-known/agent-card.json")]
    assert card["capabilities"]["streaming"] is True


def test_unknown_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown peer kind"):
        build_peer_app("nope", base_url="http://127.0.0.1:1")


def test_server_thread_reports_a_port_in_use() -> None:
    with running_peer("plain") as peer:
        clash = ServerThread(peer.app, peer.server.port)
        with pytest.raises(RuntimeError, match="exited during startup"):
            clash.start(timeout=5)


HEALTH_APP = """
import sys
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

async def healthz(request):
    return PlainTextResponse("ok")

print("child starting", flush=True)
app = Starlette(routes=[Route("/healthz", healthz)])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def test_server_process_waits_for_health_and_can_be_killed(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-c", HEALTH_APP, str(port)]
    with ServerProcess(command, port, name="health", log_path=tmp_path / "health.log") as proc:
        with httpx.Client(trust_env=False) as http:
            assert http.get(f"{proc.url}/healthz").text == "ok"
        assert proc.returncode is None
        assert proc.kill() == -signal.SIGKILL
    assert "child starting" in proc.output()


def test_server_process_that_dies_reports_its_output(tmp_path: Path) -> None:
    command = [sys.executable, "-c", "print('bad config: no agents'); raise SystemExit(3)"]
    proc = ServerProcess(command, free_port(), name="dies", log_path=tmp_path / "dies.log")
    with pytest.raises(RuntimeError, match=r"(?s)exited with code 3.*bad config: no agents"):
        proc.start(timeout=10)
