"""The MCP Tasks extension (`io.modelcontextprotocol/tasks`) at /mcp, seen by the official mcp 2.x
client: a team turn asked by a client that declares the extension is an A2A task, polled with
`tasks/get`, cancelled with `tasks/cancel`, and owned by the key that asked for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, Literal

import anyio
import httpx
import httpx2
import pytest
from mcp import MCPError, types
from mcp.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.streamable_http import streamable_http_client
from mcp_types import GetTaskRequest, GetTaskRequestParams, Request, RequestParams, Result, TaskMetadata
from pydantic import ConfigDict

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, serve_ranch

pytestmark = pytest.mark.anyio

EXTENSION = "io.modelcontextprotocol/tasks"
CONFIG = """
agents:
  - id: slow
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {sleep: 2, reply: "slow answer", route: user, reason: done}
  - id: sleepy
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {sleep: 60, reply: "too late", route: user}
  - {id: echo, kind: echo}
teams:
  - {id: crew, members: [slow], default_agent: slow}
  - {id: night, members: [sleepy], default_agent: sleepy}
"""


class Raw(Result):
    """Any result, its fields kept as they came."""

    model_config = ConfigDict(extra="allow")


async def rpc(client: Client, request: Request[Any, Any]) -> dict[str, Any]:
    result = await client.session.send_request(request, Raw)
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


class CreateTaskResult(Result):
    """The extension's task handle (`resultType: "task"`), as this test client reads it."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class Tasks(ClientExtension):
    """Declares the extension; its claim hands the task handle back as it came."""

    identifier = EXTENSION

    def claims(self) -> list[ResultClaim[Any]]:
        async def unresolved(result: CreateTaskResult, ctx: ClaimContext) -> types.CallToolResult:
            raise AssertionError("the test reads the handle itself (allow_claimed=True)")

        return [ResultClaim(result_type="task", model=CreateTaskResult, resolve=unresolved)]


class TaskIdParams(RequestParams):
    task_id: str


class CancelTask(Request[TaskIdParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams


class RawRequest(Request[dict[str, Any], str]):
    """A request whose params go as written (a malformed one)."""

    params: dict[str, Any]


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningRanch, str, str]]:
    """The hub with keys, and the keys of two callers (the owners of two organizations)."""
    with serve_ranch(CONFIG, tmp_path_factory.mktemp("mcp-tasks") / "t.db", auth="keys") as ranch:
        admin = Api(ranch.url, ADMIN_KEY)
        keys = [admin.post("/organizations", {"id": org})["owner"]["api_key"] for org in ("acme", "other")]
        yield ranch, keys[0], keys[1]


@asynccontextmanager
async def connected(url: str, key: str, *, tasks: bool = True, mode: str = "auto") -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"X-API-Key": key}, timeout=20) as http,
        Client(
            streamable_http_client(f"{url}/mcp", http_client=http),
            mode=mode,
            cache=None,
            extensions=[Tasks()] if tasks else None,
        ) as client,
    ):
        yield client


async def ask_as_task(client: Client, tool: str, message: str) -> CreateTaskResult:
    result = await client.session.call_tool(tool, {"message": message}, allow_claimed=True)
    assert isinstance(result, CreateTaskResult), result
    return result


async def get_task(client: Client, task_id: str) -> dict[str, Any]:
    return await rpc(client, GetTaskRequest(params=GetTaskRequestParams(task_id=task_id)))


async def until(client: Client, task_id: str, statuses: set[str]) -> dict[str, Any]:
    """Poll `tasks/get` until the task's status is one of `statuses` (bounded)."""
    with anyio.fail_after(20):
        while True:
            task = await get_task(client, task_id)
            if task["status"] in statuses:
                return task
            await anyio.sleep(task["pollIntervalMs"] / 1000)


def a2a_task(ranch: RunningRanch, agent: str, task_id: str, key: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 2, "method": "GetTask", "params": {"id": task_id}}
    headers = {"A2A-Version": "1.0", "X-API-Key": key}
    got: dict[str, Any] = httpx.post(ranch.agent_url(agent), json=body, headers=headers, timeout=20).json()
    return got


async def test_a_team_turn_asked_as_a_task_is_an_a2a_task_polled_to_its_answer(
    hub: tuple[RunningRanch, str, str],
) -> None:
    ranch, key, _ = hub
    async with connected(ranch.url, key) as client:
        with anyio.fail_after(5):  # at once, not after the member's second of work
            handle = await ask_as_task(client, "ask_crew", "hello")
        assert handle.status == "working" and handle.poll_interval_ms == 500 and handle.ttl_ms is None
        working = await get_task(client, handle.task_id)
        assert (working["status"], working["resultType"]) == ("working", "complete")
        assert "result" not in working and working["createdAt"] == handle.created_at
        done = await until(client, handle.task_id, {"completed", "failed", "cancelled"})
    assert done["status"] == "completed", done
    result = types.CallToolResult.model_validate(done["result"])
    assert not result.is_error
    answer = result.structured_content
    assert isinstance(answer, dict)
    assert (answer["reply"], answer["state"]) == ("slow answer", "completed")
    assert answer["route"] == ["user", "slow", "user"]
    seen = a2a_task(ranch, "crew", handle.task_id, key)["result"]
    assert seen["id"] == handle.task_id and seen["status"]["state"] == "TASK_STATE_COMPLETED"
    assert seen["contextId"] == answer["context_id"]


async def test_another_caller_cannot_see_or_cancel_the_task(hub: tuple[RunningRanch, str, str]) -> None:
    ranch, key, other = hub
    async with connected(ranch.url, key) as client, connected(ranch.url, other) as stranger:
        handle = await ask_as_task(client, "ask_night", "hello")
        for request in (
            GetTaskRequest(params=GetTaskRequestParams(task_id=handle.task_id)),
            CancelTask(params=TaskIdParams(task_id=handle.task_id)),
        ):
            with pytest.raises(MCPError) as refused:
                await rpc(stranger, request)
            assert refused.value.error.code == types.INVALID_PARAMS
            assert refused.value.error.message.startswith("params.taskId: Failed to retrieve task: no task")
        assert (await get_task(client, handle.task_id))["status"] == "working"  # still running
        await rpc(client, CancelTask(params=TaskIdParams(task_id=handle.task_id)))
    assert "error" in a2a_task(ranch, "night", handle.task_id, other)  # not found for the other key


async def test_tasks_cancel_stops_the_turn_and_cancels_the_a2a_task(
    hub: tuple[RunningRanch, str, str],
) -> None:
    ranch, key, _ = hub
    async with connected(ranch.url, key) as client:
        handle = await ask_as_task(client, "ask_night", "hello")
        acked = await rpc(client, CancelTask(params=TaskIdParams(task_id=handle.task_id)))
        assert acked["resultType"] == "complete"
        ended = await until(client, handle.task_id, {"completed", "failed", "cancelled"})
    assert ended["status"] == "cancelled" and "result" not in ended
    assert a2a_task(ranch, "night", handle.task_id, key)["result"]["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a_client_without_the_extension_gets_the_answer_directly(
    hub: tuple[RunningRanch, str, str],
) -> None:
    ranch, key, _ = hub
    async with connected(ranch.url, key, tasks=False) as client:
        assert EXTENSION in (client.server_capabilities.extensions or {})
        with anyio.fail_after(20):
            result = await client.call_tool("ask_crew", {"message": "hello"})
        with pytest.raises(MCPError) as refused:
            await get_task(client, "whatever")
    assert isinstance(result.structured_content, dict)
    assert result.structured_content["route"] == ["user", "slow", "user"]
    assert refused.value.error.code == -32021  # the extension's methods need its declaration


async def test_a_turn_that_answers_at_once_and_a_2025_task_request_get_the_answer_directly(
    hub: tuple[RunningRanch, str, str],
) -> None:
    """`echo` answers in the request, so it makes no task even for a declaring client; a 2025-11-25
    client's `task` field asks for the core tasks of that revision, which ranch does not serve."""
    ranch, key, _ = hub
    async with connected(ranch.url, key) as client:
        echoed = await client.session.call_tool("ask_echo", {"message": "hi"}, allow_claimed=True)
    call = types.CallToolRequestParams(
        name="ask_crew", arguments={"message": "hello"}, task=TaskMetadata(ttl=60000)
    )
    async with connected(ranch.url, key, mode="legacy") as legacy:
        assert legacy.protocol_version == "2025-11-25"
        with anyio.fail_after(20):
            answered = await legacy.session.send_request(
                types.CallToolRequest(params=call), types.CallToolResult
            )
    assert isinstance(echoed, types.CallToolResult) and isinstance(echoed.structured_content, dict)
    assert echoed.structured_content["reply"] == "hi"
    assert isinstance(answered.structured_content, dict)
    assert answered.structured_content["route"] == ["user", "slow", "user"]


async def test_bad_task_requests_get_an_error_naming_the_field(hub: tuple[RunningRanch, str, str]) -> None:
    ranch, key, _ = hub
    async with connected(ranch.url, key) as client:
        with pytest.raises(MCPError) as unknown:
            await get_task(client, "no-such-task")
        with pytest.raises(MCPError) as malformed:
            await rpc(client, RawRequest(method="tasks/get", params={"taskId": 5}))
        with pytest.raises(MCPError) as missing:
            await rpc(client, RawRequest(method="tasks/cancel", params={}))
    assert unknown.value.error.code == types.INVALID_PARAMS
    assert unknown.value.error.message == "params.taskId: Failed to retrieve task: no task 'no-such-task'"
    assert malformed.value.error.code == types.INVALID_PARAMS
    assert malformed.value.error.message.startswith("params.taskId: "), malformed.value.error.message
    assert missing.value.error.code == types.INVALID_PARAMS
    assert missing.value.error.message.startswith("params.taskId: "), missing.value.error.message
