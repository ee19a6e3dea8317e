"""A2A over gRPC (`ranch serve --grpc-port`): the official a2a-sdk gRPC client against a served hub.

One port serves every agent and team, the request's `tenant` naming it; each card lists that
interface. The calls go through the guard chain and the one request handler the HTTP bindings
use, so a routed team turn, its tasks and push configs, keys, extensions and refusals behave as
there, with gRPC status codes from the one error table.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import grpc
import httpx
import pytest
from a2a.client import Client
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from google.rpc import error_details_pb2, status_pb2

from _support.grpc_client import grpc_card, grpc_client, stub
from _support.hubkit import ADMIN_KEY, Api, RunningRanch, serve_ranch
from _support.sdk import trail_of, user_message
from ranch.agents.base import text_of
from ranch.cli.demo import DEMO_YAML
from ranch.wire.client_routing import URI

_EXTRA_AGENTS = """
  - id: slow
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    timeout: 60
    options: {sleep: 30, reply: "slow answer", route: user, reason: done}
  - id: step1
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {sleep: 0.4, reply: "step1 done", route: step2, reason: second step}
  - id: step2
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {sleep: 0.4, reply: "step2 done", route: user, reason: finished}
  - id: guarded
    kind: echo
    require_extensions: ["urn:x-required"]
"""
_EXTRA_TEAMS = """
  - id: slowdesk
    members: [slow]
    default_agent: slow
  - id: pipeline
    members: [step1, step2]
    default_agent: step1
"""
YAML = DEMO_YAML.replace("\nteams:\n", _EXTRA_AGENTS + "\nteams:\n") + _EXTRA_TEAMS

TIMEOUT = 10.0
PAPERS = "find papers on quantum error correction"
PAPERS_ROUTE = ["triage", "researcher", "triage"]
COMPLETED = TaskState.TASK_STATE_COMPLETED
WORKING = TaskState.TASK_STATE_WORKING
CANCELED = TaskState.TASK_STATE_CANCELED
KEY = {"x-api-key": ADMIN_KEY}


@pytest.fixture(scope="module")
def ranch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    database = tmp_path_factory.mktemp("grpc") / "t.db"
    with serve_ranch(YAML, database, grpc_port=0, allow_private_outbound=True) as served:
        yield served


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    database = tmp_path_factory.mktemp("grpc-keys") / "t.db"
    with serve_ranch(YAML, database, grpc_port=0, auth="keys") as served:
        yield served


def target_of(ranch: RunningRanch) -> str:
    """The gRPC server's `host:port`, as the cards give it."""
    card = httpx.get(f"{ranch.agent_url('echo')}/.well-known/agent-card.json", timeout=TIMEOUT).json()
    return str(next(i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "GRPC"))


def kind(response: StreamResponse) -> str:
    return str(response.WhichOneof("payload"))


async def ask(client: Client, text: str, **configuration: Any) -> Task:
    request = SendMessageRequest(
        message=user_message(text), configuration=SendMessageConfiguration(**configuration)
    )
    with anyio.fail_after(TIMEOUT):
        responses = [response async for response in client.send_message(request)]
    assert len(responses) == 1 and responses[0].HasField("task"), [MessageToDict(r) for r in responses]
    return responses[0].task


async def raw_call(
    ranch: RunningRanch, method: str, request: Any, metadata: tuple[tuple[str, str], ...] = ()
) -> tuple[Any, Any]:
    """One call on the generated stub (no client-side checks): (response, initial metadata), or the
    AioRpcError the server answered with."""
    async with grpc.aio.insecure_channel(target_of(ranch)) as channel:
        service = stub(channel)
        sent = (("a2a-version", "1.0"), *metadata)
        call = getattr(service, method)(request, metadata=sent, timeout=TIMEOUT)
        response = await call
        return response, await call.initial_metadata()


async def refusal(
    ranch: RunningRanch, method: str, request: Any, *metadata: tuple[str, str]
) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await raw_call(ranch, method, request, metadata)
    return caught.value


def error_info(error: grpc.aio.AioRpcError) -> error_details_pb2.ErrorInfo:
    """The ErrorInfo in the rich status (`grpc-status-details-bin`) of a refused call."""
    for name, value in error.trailing_metadata() or ():
        if name == "grpc-status-details-bin":
            status = status_pb2.Status.FromString(value)
            for detail in status.details:
                info = error_details_pb2.ErrorInfo()
                if detail.Unpack(info):
                    return info
    raise AssertionError(f"no ErrorInfo in {error!r}")


# -- cards -----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_every_card_lists_the_grpc_interface_with_its_tenant(ranch: RunningRanch) -> None:
    for agent_id in ("helpdesk", "echo", "triage"):
        card = await grpc_card(ranch.agent_url(agent_id))
        grpc_interfaces = [i for i in card.supported_interfaces if i.protocol_binding == "GRPC"]
        assert [(i.tenant, i.protocol_version) for i in grpc_interfaces] == [(agent_id, "1.0")]
        assert grpc_interfaces[0].url == target_of(ranch)
        assert card.supported_interfaces[0].protocol_binding == "JSONRPC"  # HTTP stays preferred


# -- a routed team turn through the a2a-sdk gRPC client --------------------------------------------


@pytest.mark.anyio
async def test_team_turn_send_and_stream_per_hop(ranch: RunningRanch) -> None:
    async with grpc_client(ranch.agent_url("helpdesk")) as client:
        task = await ask(client, PAPERS)
    assert task.status.state == COMPLETED
    assert [hop["agent"] for hop in trail_of(task)] == PAPERS_ROUTE
    assert "Research notes" in text_of(task.status.message)

    async with grpc_client(ranch.agent_url("helpdesk"), streaming=True) as client:
        with anyio.fail_after(TIMEOUT):
            events = [e async for e in client.send_message(SendMessageRequest(message=user_message(PAPERS)))]
    kinds = [kind(event) for event in events]
    assert kinds == ["task"] + ["status_update", "artifact_update"] * 3 + ["status_update"], kinds
    statuses = [event.status_update for event in events if event.HasField("status_update")]
    assert [s.status.state for s in statuses] == [WORKING] * 3 + [COMPLETED]
    for status, agent in zip(statuses[:-1], PAPERS_ROUTE, strict=True):
        assert text_of(status.status.message).startswith(f"{agent} is working")


@pytest.mark.anyio
async def test_get_list_cancel_and_subscribe(ranch: RunningRanch) -> None:
    async with grpc_client(ranch.agent_url("helpdesk")) as client:
        task = await ask(client, PAPERS)
        with anyio.fail_after(TIMEOUT):
            got = await client.get_task(GetTaskRequest(id=task.id))
            listed = await client.list_tasks(ListTasksRequest(context_id=task.context_id))
        assert got.id == task.id and got.status.state == COMPLETED
        assert [t.id for t in listed.tasks] == [task.id]

    async with grpc_client(ranch.agent_url("slowdesk")) as client:
        running = await ask(client, "take your time", return_immediately=True)
        assert running.status.state not in (COMPLETED, CANCELED)
        with anyio.fail_after(TIMEOUT):
            canceled = await client.cancel_task(CancelTaskRequest(id=running.id))
        assert canceled.status.state == CANCELED

    async with grpc_client(ranch.agent_url("pipeline")) as client:
        running = await ask(client, "two steps please", return_immediately=True)
    async with grpc_client(ranch.agent_url("pipeline"), streaming=True) as client:
        with anyio.fail_after(TIMEOUT):
            events = [e async for e in client.subscribe(SubscribeToTaskRequest(id=running.id))]
    assert events[0].HasField("task") and events[0].task.id == running.id
    assert events[-1].status_update.status.state == COMPLETED
    trail = MessageToDict(events[-1].status_update.metadata)[URI]["trail"]
    assert [hop["agent"] for hop in trail] == ["step1", "step2"]


@pytest.mark.anyio
async def test_push_configs(ranch: RunningRanch) -> None:
    async with grpc_client(ranch.agent_url("helpdesk")) as client:
        task = await ask(client, PAPERS)
        config = TaskPushNotificationConfig(task_id=task.id, id="hook", url="http://127.0.0.1:9/hook")
        with anyio.fail_after(TIMEOUT):
            created = await client.create_task_push_notification_config(config)
            got = await client.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook")
            )
            listed = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
            await client.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook")
            )
            after = await client.list_task_push_notification_configs(
                ListTaskPushNotificationConfigsRequest(task_id=task.id)
            )
    assert created.url == got.url == "http://127.0.0.1:9/hook"
    assert [c.id for c in listed.configs] == ["hook"]
    assert list(after.configs) == []


# -- keys ------------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    "metadata", [KEY, {"authorization": f"Bearer {ADMIN_KEY}"}], ids=["x-api-key", "bearer"]
)
async def test_keyed_team_turn(keyed: RunningRanch, metadata: dict[str, str]) -> None:
    async with grpc_client(keyed.agent_url("helpdesk"), metadata=metadata) as client:
        task = await ask(client, PAPERS)
        with anyio.fail_after(TIMEOUT):
            got = await client.get_task(GetTaskRequest(id=task.id))
    assert got.status.state == COMPLETED
    assert [hop["agent"] for hop in trail_of(got)] == PAPERS_ROUTE


@pytest.mark.anyio
async def test_missing_or_wrong_key_is_unauthenticated(keyed: RunningRanch) -> None:
    request = SendMessageRequest(tenant="echo", message=user_message("hi"))
    missing = await refusal(keyed, "SendMessage", request)
    assert missing.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "key" in (missing.details() or "").lower()
    wrong = await refusal(keyed, "SendMessage", request, ("x-api-key", "rk_not_a_key"))
    assert wrong.code() == grpc.StatusCode.UNAUTHENTICATED
    assert error_info(wrong).reason == "UNAUTHENTICATED"


# -- extensions over metadata ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_routing_extension_is_negotiated_over_metadata(ranch: RunningRanch) -> None:
    request = SendMessageRequest(tenant="helpdesk", message=user_message(PAPERS))
    response, initial = await raw_call(ranch, "SendMessage", request, (("a2a-extensions", URI),))
    assert response.task.status.state == COMPLETED
    assert ("a2a-extensions", URI) in tuple(initial)

    plain, initial = await raw_call(
        ranch, "SendMessage", SendMessageRequest(tenant="echo", message=user_message())
    )
    assert "a2a-extensions" not in dict(initial)


@pytest.mark.anyio
async def test_a_required_extension_is_enforced(ranch: RunningRanch) -> None:
    request = SendMessageRequest(tenant="guarded", message=user_message("hi"))
    refused = await refusal(ranch, "SendMessage", request)
    assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "urn:x-required" in (refused.details() or "")
    response, initial = await raw_call(ranch, "SendMessage", request, (("a2a-extensions", "urn:x-required"),))
    assert response.HasField("message") or response.HasField("task")
    assert dict(initial)["a2a-extensions"] == "urn:x-required"


# -- bad input -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_unknown_or_missing_tenant(ranch: RunningRanch) -> None:
    unknown = await refusal(ranch, "SendMessage", SendMessageRequest(tenant="nobody", message=user_message()))
    assert unknown.code() == grpc.StatusCode.NOT_FOUND
    assert "tenant" in (unknown.details() or "") and "nobody" in (unknown.details() or "")
    assert error_info(unknown).metadata["field"] == "tenant"
    missing = await refusal(ranch, "GetTask", GetTaskRequest(id="x"))
    assert missing.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "tenant" in (missing.details() or "")


@pytest.mark.anyio
async def test_oversized_and_malformed_messages_name_the_field(ranch: RunningRanch) -> None:
    big = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text="x" * 300_000)])
    oversized = await refusal(ranch, "SendMessage", SendMessageRequest(tenant="echo", message=big))
    assert oversized.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "message" in (oversized.details() or "")

    no_id = Message(role=Role.ROLE_USER, parts=[Part(text="hi")])
    missing = await refusal(ranch, "SendMessage", SendMessageRequest(tenant="echo", message=no_id))
    assert missing.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "messageId" in (missing.details() or "")

    async with grpc.aio.insecure_channel(target_of(ranch)) as channel:
        send_bytes = channel.unary_unary("/lf.a2a.v1.A2AService/SendMessage")
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await send_bytes(b"\xff\xff\xff not protobuf", timeout=TIMEOUT)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "SendMessageRequest" in (caught.value.details() or "")


def test_rate_limits_hold_on_grpc(tmp_path: Path) -> None:
    async def calls(target: str) -> list[grpc.StatusCode]:
        codes = []
        async with grpc.aio.insecure_channel(target) as channel:
            service = stub(channel)
            for _ in range(5):
                try:
                    await service.GetTask(GetTaskRequest(tenant="echo", id="none"), timeout=TIMEOUT)
                except grpc.aio.AioRpcError as exc:
                    codes.append(exc.code())
        return codes

    with serve_ranch(YAML, tmp_path / "t.db", grpc_port=0, caller_rate=0.001, caller_burst=4) as hub:
        codes = anyio.run(calls, target_of(hub))  # the card costs one of the burst
    assert codes[:3] == [grpc.StatusCode.NOT_FOUND] * 3  # the task, not the agent
    assert codes[3:] == [grpc.StatusCode.RESOURCE_EXHAUSTED] * 2


def test_with_root_an_empty_tenant_is_the_root_agent(tmp_path: Path) -> None:
    async def send(target: str) -> str:
        async with grpc.aio.insecure_channel(target) as channel:
            request = SendMessageRequest(message=user_message("to the root"))
            response = await stub(channel).SendMessage(request, timeout=TIMEOUT)
        return text_of(response.message)

    with serve_ranch(YAML, tmp_path / "t.db", grpc_port=0, root="echo") as hub:
        assert "to the root" in anyio.run(send, target_of(hub))


@pytest.mark.anyio
async def test_a_stream_ends_when_its_key_is_revoked(keyed: RunningRanch) -> None:
    admin = Api(keyed.url, ADMIN_KEY)
    owner = Api(keyed.url, admin.post("/organizations", {"id": "grpcorg"})["owner"]["api_key"])
    created = owner.post("/keys", {})
    key, key_id = created["api_key"], created["key"]["id"]
    async with grpc.aio.insecure_channel(target_of(keyed)) as channel:
        request = SendMessageRequest(tenant="slowdesk", message=user_message("take your time"))
        stream = stub(channel).SendStreamingMessage(request, metadata=(("x-api-key", key),), timeout=TIMEOUT)
        with anyio.fail_after(TIMEOUT):
            first = await stream.read()
        assert first.HasField("task")
        await anyio.to_thread.run_sync(lambda: owner.post(f"/keys/{key_id}/revoke", None, status=200))
        with anyio.fail_after(TIMEOUT), pytest.raises(grpc.aio.AioRpcError) as ended:
            while True:  # the events already on their way, then the end
                if await stream.read() == grpc.aio.EOF:
                    break
    assert ended.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "revoked" in (ended.value.details() or "")
