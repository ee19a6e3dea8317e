"""A task run by one replica, seen from another: GetTask, ListTasks, SubscribeToTask, CancelTask and
push notification configs.

Two hubs on one database and one Redis prefix stand for two replicas behind a load balancer:
a task started on the first is followed, read and listed on the second as it runs, through the
official a2a-sdk client. Redis (127.0.0.1:6379) and, for the PostgreSQL runs, PostgreSQL are
needed; without them these tests fail, saying so.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from _support import probes
from _support.hubkit import RunningRanch, serve_ranch, wait_until
from _support.sdk import sdk_client, user_message
from _support.servers import ServerThread
from ranch.fanout import redis as fanout_redis
from ranch.policy import redis_client
from ranch.policy.redis_client import BLOCK_SLICE, REPLY_TIMEOUT

REDIS = "redis://127.0.0.1:6379/0"
CONFIG = """
agents:
  - id: reader
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 1.5, chunks: ["Reading ", "the ", "papers"], chunk_pause: 0.5}
  - id: sleeper
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 60, reply: "too late"}
  - id: quiet
    kind: python
    entry: _support.probes:Probe
    options: {chunks: ["Before the pause, ", "after it"], chunk_pause: 1.5}  # quiet past QUICK_REPLY_TIMEOUT
"""
WORKING = TaskState.TASK_STATE_WORKING
QUICK_REPLY_TIMEOUT = 1.0
"""The Redis reply timeout of the quiet-member test (REPLY_TIMEOUT in production)."""


@contextmanager
def replicas(database_url: str, **settings: Any) -> Iterator[tuple[RunningRanch, RunningRanch]]:
    """Two hubs on one database and one Redis prefix: two replicas behind a load balancer."""
    shared: dict[str, Any] = {"redis_url": REDIS, "redis_prefix": f"ranch-test-{uuid.uuid4().hex[:8]}"}
    with (
        serve_ranch(CONFIG, database_url, **shared, **settings) as first,
        serve_ranch(CONFIG, database_url, **shared, **settings) as second,
    ):
        yield first, second


async def started_on(client: Any, text: str) -> Task:
    """The task a SendMessage with returnImmediately starts, as it answers at once."""
    request = SendMessageRequest(
        message=user_message(text), configuration=SendMessageConfiguration(return_immediately=True)
    )
    task: Task = [response async for response in client.send_message(request)][0].task
    return task


def test_a_task_running_on_one_replica_is_followed_read_and_listed_on_another(database_url: str) -> None:
    with replicas(database_url) as (first, second):

        async def scenario() -> None:
            async with sdk_client(first.agent_url("reader")) as on_first:
                started = await started_on(on_first, "read")
            async with sdk_client(second.agent_url("reader"), streaming=True) as on_second:
                events = [event async for event in on_second.subscribe(SubscribeToTaskRequest(id=started.id))]
                assert events[0].task.id == started.id
                chunks = [
                    part.text
                    for event in events
                    if event.HasField("artifact_update")
                    for part in event.artifact_update.artifact.parts
                ]
                assert "".join(chunks) == "Reading the papers"
                assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
                done = await on_second.get_task(GetTaskRequest(id=started.id))
                assert done.status.state == TaskState.TASK_STATE_COMPLETED

        anyio.run(scenario)


def test_a_subscriber_on_another_replica_follows_a_member_quiet_longer_than_redis_timeouts(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other replica reads the task's log from Redis with blocking reads: a member quiet for
    longer than the Redis client's reply timeout must not break the subscriber's stream. The
    timeouts are scaled down (5 s and 2 s slices in production) so the member is quiet for 1.5 s,
    not 5.5: the same ratio, a quarter of the wait."""
    monkeypatch.setattr(redis_client, "REPLY_TIMEOUT", QUICK_REPLY_TIMEOUT)
    monkeypatch.setattr(fanout_redis, "REPLY_TIMEOUT", QUICK_REPLY_TIMEOUT)
    monkeypatch.setattr(fanout_redis, "BLOCK_SLICE", QUICK_REPLY_TIMEOUT * BLOCK_SLICE / REPLY_TIMEOUT)
    with replicas(database_url) as (first, second):

        async def scenario() -> None:
            async with sdk_client(first.agent_url("quiet")) as on_first:
                started = await started_on(on_first, "wait for it")
            async with sdk_client(second.agent_url("quiet"), streaming=True) as on_second:
                events = [event async for event in on_second.subscribe(SubscribeToTaskRequest(id=started.id))]
            chunks = [
                part.text
                for event in events
                if event.HasField("artifact_update")
                for part in event.artifact_update.artifact.parts
            ]
            assert "".join(chunks) in ("Before the pause, after it", "after it")  # the first may precede it
            assert events[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED

        anyio.run(scenario)


def test_another_replica_reads_and_lists_a_running_task_as_it_is_now(database_url: str) -> None:
    with replicas(database_url) as (first, second):

        async def scenario() -> None:
            async with sdk_client(first.agent_url("reader")) as on_first:
                started = await started_on(on_first, "read")
            async with sdk_client(second.agent_url("reader")) as on_second:
                states = []
                with anyio.fail_after(10):
                    for _ in range(200):  # polled as a client would, until the run has begun its work
                        states.append((await on_second.get_task(GetTaskRequest(id=started.id))).status.state)
                        if states[-1] == WORKING:
                            break
                        await anyio.sleep(0.05)
                assert states[-1] == WORKING
                listed = await on_second.list_tasks(ListTasksRequest(status=WORKING))
                assert started.id in [task.id for task in listed.tasks]

        anyio.run(scenario)


def test_a_task_canceled_on_another_replica_stops_where_it_runs(database_url: str) -> None:
    with replicas(database_url) as (first, second):

        async def scenario() -> None:
            async with sdk_client(first.agent_url("sleeper")) as on_first:
                started = await started_on(on_first, "wait")
                wait_until(lambda: probes.BUSY["sleeper"] == 1, what="the first replica running it")
                async with sdk_client(second.agent_url("sleeper")) as on_second:
                    canceled = await on_second.cancel_task(CancelTaskRequest(id=started.id))
                    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
                # the run on the first replica stopped: it will not overwrite CANCELED with its answer
                assert probes.BUSY["sleeper"] == 0
                kept = await on_first.get_task(GetTaskRequest(id=started.id))
                assert kept.status.state == TaskState.TASK_STATE_CANCELED
                assert "too late" not in str(kept)

        anyio.run(scenario)


def test_a_push_config_made_on_another_replica_is_told_the_runs_updates(database_url: str) -> None:
    states: list[str] = []

    async def hook(request: Request) -> Response:
        body = await request.json()
        states.append(body.get("statusUpdate", {}).get("status", {}).get("state", ""))
        return JSONResponse({"ok": True})

    with (
        ServerThread(Starlette(routes=[Route("/hook", hook, methods=["POST"])]), name="hook") as webhook,
        replicas(database_url, allow_private_outbound=True) as (first, second),  # the webhook is on 127.0.0.1
    ):

        async def scenario() -> None:
            async with sdk_client(first.agent_url("reader")) as on_first:
                started = await started_on(on_first, "read")
            async with sdk_client(second.agent_url("reader")) as on_second:  # the run sleeps 1.5 s first
                config = TaskPushNotificationConfig(task_id=started.id, id="hook", url=f"{webhook.url}/hook")
                await on_second.create_task_push_notification_config(config)
            wait_until(lambda: "TASK_STATE_COMPLETED" in states, what="the end, told by the first replica")

        anyio.run(scenario)
