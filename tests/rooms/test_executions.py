"""An execution is a full A2A task: every task method works on it, through the official a2a-sdk client.

An agent's work in a room is one long-lived task of the task engine (docs/api.md, "Executions
as A2A tasks"). These tests drive executions as an outside A2A caller would, on both
bindings: SendMessage and SendStreamingMessage into the room, GetTask, ListTasks by the
room's contextId, SubscribeToTask, CancelTask and push notification configs; and the ways an
execution ends: the agent says it is done, a room admin completes it, the agent waits for
input and is answered.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from _support import probes
from _support.hubkit import ADMIN_KEY, Api, serve_ranch, wait_until
from _support.peers import RunningPeer, running_peer
from _support.sdk import sdk_client, send, user_message
from _support.servers import ServerThread

CONFIG = """
agents:
  - id: greeter
    kind: rules
    rules: [{reply: "Hello from greeter: {text}"}]
  - id: streamer
    kind: python
    entry: _support.probes:Probe
    options: {chunks: ["Reading ", "the ", "papers"]}
  - id: closer
    kind: python
    entry: _support.probes:Probe
    options: {reply: "All done: {text}", done: true}
  - id: slow
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 30, reply: "too late"}
"""
BINDINGS = ["JSONRPC", "HTTP+JSON"]
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED


def status_of(task: Any) -> str:
    return str(MessageToDict(task.metadata)["ranch.execution"]["status"])


def room_with(admin: Api, *agents: str, **extra: Any) -> str:
    participants = [{"kind": "agent", "id": agent} for agent in agents]
    room: dict[str, Any] = admin.post("/rooms", {"title": "Work", "participants": participants, **extra})
    return str(room["id"])


@dataclass
class Webhook:
    url: str
    received: list[dict[str, Any]] = field(default_factory=list)
    tokens: list[str] = field(default_factory=list)
    """The `X-A2A-Notification-Token` of each update received: which config it was sent for."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def states(self) -> list[str]:
        return [state for _, state in self.updates()]

    def updates(self) -> list[tuple[str, str]]:
        """(token, task state) of each update received, in order."""
        with self.lock:
            return [
                (
                    token,
                    body.get("statusUpdate", {}).get("status", {}).get("state")
                    or body.get("task", {}).get("status", {}).get("state", ""),
                )
                for token, body in zip(self.tokens, self.received, strict=True)
            ]


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook(url="")

    async def record(request: Request) -> Response:
        body = await request.json()
        with hook.lock:
            hook.received.append(body)
            hook.tokens.append(request.headers.get("X-A2A-Notification-Token", ""))
        return JSONResponse({"ok": True})

    with ServerThread(Starlette(routes=[Route("/hook", record, methods=["POST"])]), name="hook") as server:
        hook.url = f"{server.url}/hook"
        yield hook


@pytest.mark.parametrize("binding", BINDINGS)
def test_every_task_method_works_on_an_execution(binding: str, tmp_path: Any, webhook: Webhook) -> None:
    database = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    with serve_ranch(CONFIG, database, allow_private_outbound=True) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "greeter", "streamer", "slow")

        async def scenario() -> None:
            async with sdk_client(hub.agent_url("greeter"), binding=binding) as client:
                (first,) = await send(client, user_message("one", context_id=room))
                execution = first.task
                assert execution.context_id == room and execution.status.state == INPUT_REQUIRED
                assert status_of(execution) == "ready"
                assert execution.artifacts[0].parts[0].text == "Hello from greeter: one"

                fetched = await client.get_task(GetTaskRequest(id=execution.id))
                assert [m.parts[0].text for m in fetched.history] == ["one", "Hello from greeter: one"]

                listed = await client.list_tasks(ListTasksRequest(context_id=room))
                assert execution.id in [task.id for task in listed.tasks]
                assert all(task.context_id == room for task in listed.tasks)

                config = TaskPushNotificationConfig(
                    task_id=execution.id, id="hook", url=webhook.url, token="t0k"
                )
                created = await client.create_task_push_notification_config(config)
                assert created.url == webhook.url
                configs = await client.list_task_push_notification_configs(
                    ListTaskPushNotificationConfigsRequest(task_id=execution.id)
                )
                assert [c.id for c in configs.configs] == ["hook"]
                also = TaskPushNotificationConfig(
                    task_id=execution.id, id="hook2", url=webhook.url, token="t1"
                )
                await client.create_task_push_notification_config(also)
                (second,) = await send(client, user_message("two", context_id=room))
                assert second.task.id == execution.id  # one execution per agent per room: the same task
                wait_until(
                    lambda: "TASK_STATE_INPUT_REQUIRED" in webhook.states(), what="the webhook's update"
                )
                kept = await client.get_task_push_notification_config(
                    GetTaskPushNotificationConfigRequest(task_id=execution.id, id="hook")
                )
                assert (kept.url, kept.task_id) == (webhook.url, execution.id)
                await client.delete_task_push_notification_config(
                    DeleteTaskPushNotificationConfigRequest(task_id=execution.id, id="hook")
                )
                configs = await client.list_task_push_notification_configs(
                    ListTaskPushNotificationConfigsRequest(task_id=execution.id)
                )
                assert [c.id for c in configs.configs] == ["hook2"]
                told = len(webhook.tokens)
                for text in ("three", "four"):
                    (reply,) = await send(client, user_message(text, context_id=room))
                    assert reply.task.id == execution.id

                # a task's updates are delivered one after the other (each to all its configs at
                # once): when "hook2" has heard that "four" was answered, every delivery of
                # "three" is over, and a "hook" still kept would have been sent some of them
                def answered_twice() -> bool:
                    updates = webhook.updates()[told:]
                    return updates.count(("t1", "TASK_STATE_INPUT_REQUIRED")) >= 2

                wait_until(answered_twice, what="hook2's updates")
                assert all(token != "t0k" for token, _ in webhook.updates()[told:])

            async with sdk_client(hub.agent_url("streamer"), binding=binding, streaming=True) as client:
                request = SendMessageRequest(message=user_message("read", context_id=room))
                events = [event async for event in client.send_message(request)]
                chunks = [
                    part.text
                    for event in events
                    if event.HasField("artifact_update")
                    for part in event.artifact_update.artifact.parts
                ]
                assert "".join(chunks).startswith("Reading the papers")
                assert (
                    events[-1].task.status.state == INPUT_REQUIRED and status_of(events[-1].task) == "ready"
                )

            admin.post(f"/rooms/{room}/messages", {"text": "@slow take your time"})
            slow = wait_until(
                lambda: (
                    (admin.executions(room).get("slow") or {}).get("status") == "working"
                    and admin.executions(room)["slow"]
                ),
                what="slow working",
            )
            async with sdk_client(hub.agent_url("slow"), binding=binding, streaming=True) as client:
                seen: list[Any] = []
                subscribed = anyio.Event()

                async def watch() -> None:
                    async for event in client.subscribe(SubscribeToTaskRequest(id=slow["id"])):
                        seen.append(event)
                        subscribed.set()  # the first event is the task as it stands

                async with anyio.create_task_group() as group:
                    group.start_soon(watch)
                    with anyio.fail_after(10):
                        await subscribed.wait()
                    canceled = await client.cancel_task(CancelTaskRequest(id=slow["id"]))
                    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
                assert seen and seen[0].task.id == slow["id"]
            wait_until(lambda: probes.BUSY["slow"] == 0, what="the slow agent stopped")
            assert admin.executions(room)["slow"]["status"] == "canceled"
            assert "too late" not in [m["text"] for m in admin.messages(room)]

        anyio.run(scenario)


def test_an_execution_ends_when_its_agent_is_done_or_an_admin_completes_it(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        bob_key = admin.post("/users", {"id": "bob", "name": "Bob"})["api_key"]
        bob = Api(hub.url, bob_key)
        room = admin.post(
            "/rooms",
            {
                "title": "Endings",
                "participants": [
                    {"kind": "user", "id": "bob"},
                    {"kind": "agent", "id": "closer"},
                    {"kind": "agent", "id": "greeter"},
                ],
            },
        )["id"]

        admin.post(f"/rooms/{room}/messages", {"text": "@closer wrap it up"})
        wait_until(lambda: admin.execution_status(room, "closer") == "completed", what="closer done")
        first = admin.executions(room)["closer"]
        assert [m["text"] for m in admin.messages(room)][-1] == "All done: wrap it up"
        task = admin.get(f"/executions/{first['id']}/task")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        admin.post(f"/rooms/{room}/messages", {"text": "@closer once more"})
        wait_until(lambda: admin.executions(room)["closer"]["id"] != first["id"], what="a new execution")

        bob.post(f"/rooms/{room}/messages", {"text": "@greeter hi"})
        wait_until(lambda: admin.execution_status(room, "greeter") == "ready", what="greeter ready")
        greeter = admin.executions(room)["greeter"]
        refused = bob.call("POST", f"/executions/{greeter['id']}/complete", {"reason": "not mine to end"})
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "PERMISSION_DENIED"
        completed = admin.post(
            f"/executions/{greeter['id']}/complete", {"reason": "thread closed"}, status=200
        )
        assert completed["status"] == "completed" and completed["reason"] == "thread closed"
        task = admin.get(f"/executions/{greeter['id']}/task")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        again = admin.call("POST", f"/executions/{greeter['id']}/complete")
        assert again.status_code == 409 and again.json()["error"]["code"] == "CONFLICT"


@pytest.fixture
def asker() -> Iterator[RunningPeer]:
    with running_peer("asker", name="Asker") as running:
        yield running


def test_an_execution_waits_for_input_and_its_answer_continues_it(
    database_url: str, asker: RunningPeer
) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        admin.post("/agents", {"id": "asker", "kind": "remote", "url": asker.url})
        room = room_with(admin, "asker")

        admin.post(f"/rooms/{room}/messages", {"text": "@asker book a table"})
        wait_until(lambda: admin.execution_status(room, "asker") == "input-required", what="a question")
        execution = admin.executions(room)["asker"]
        question = admin.messages(room)[-1]
        assert question["sender"]["id"] == "asker"
        task = admin.get(f"/executions/{execution['id']}/task")
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert task["metadata"]["ranch.execution"]["status"] == "input-required"

        admin.post(f"/rooms/{room}/messages", {"text": "@asker for two, at eight"})
        wait_until(lambda: admin.execution_status(room, "asker") == "ready", what="the answer taken")
        answered = admin.executions(room)["asker"]
        assert answered["id"] == execution["id"] and answered["turns"] == 2
        # the remote agent's own task was continued, not a new one started
        remote_tasks = {message.task_id for message in asker.recorder.wait_for_messages(2)}
        assert len(remote_tasks) == 1 and "" not in remote_tasks


@pytest.mark.parametrize("binding", BINDINGS)
def test_an_a2a_caller_answers_a_waiting_execution_by_its_task_id(
    binding: str, database_url: str, asker: RunningPeer
) -> None:
    with serve_ranch(CONFIG, database_url, allow_private_outbound=True) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        admin.post("/agents", {"id": "asker", "kind": "remote", "url": asker.url})
        room = room_with(admin, "asker")
        admin.post(f"/rooms/{room}/messages", {"text": "@asker book a table"})
        wait_until(lambda: admin.execution_status(room, "asker") == "input-required", what="a question")
        execution = admin.executions(room)["asker"]

        async def answer() -> Any:
            async with sdk_client(hub.agent_url("asker"), binding=binding) as client:
                message = user_message("for two, at eight", context_id=room, task_id=execution["id"])
                (event,) = await send(client, message)
                return event.task

        task = anyio.run(answer)
        assert task.id == execution["id"] and task.context_id == room
        assert task.status.state == INPUT_REQUIRED and status_of(task) == "ready"
        answered = admin.executions(room)["asker"]
        assert answered["id"] == execution["id"] and answered["turns"] == 2
        assert "for two, at eight" in [m["text"] for m in admin.messages(room)]
        remote_tasks = {message.task_id for message in asker.recorder.wait_for_messages(2)}
        assert len(remote_tasks) == 1 and "" not in remote_tasks  # the remote task was continued
