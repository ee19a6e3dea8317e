"""Push notifications a replica was sending when it died are sent by another, in order.

Two `ranch serve` processes on one database with `--lease 1`. A task run on the first has a
webhook that does not answer its first notification: the first replica holds that update and
the ones behind it when it is killed (`kill -9`). Once the webhook answers again, the second
replica sends them all, the final COMPLETED last. SQLite and PostgreSQL.

The answer that tells the task's end comes only once every update is held in the outbox: a
replica killed the moment its caller hears COMPLETED still leaves that COMPLETED to be sent.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy import select
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from _support import TESTS
from _support.hubkit import ADMIN_KEY, wait_until
from _support.servers import ServerProcess, ServerThread, free_port
from ranch.db.engine import open_engine
from ranch.db.models import push_outbox

CONFIG = """
agents:
  - id: relay
    kind: python
    entry: _support.probes:Probe
    options: {reply: "relayed", task: true}
"""
TAKEN_OVER = 20.0
"""Seconds the live replica may take to send what the dead one held: the lease (1 s), a round and
room for a loaded machine."""


@dataclass
class Webhook:
    """Records every notification; holds every request until `answering` is set."""

    url: str = ""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    arrived: int = 0
    answering: threading.Event = field(default_factory=threading.Event)

    def states(self, task_id: str) -> list[str]:
        found = []
        for body in self.bodies:
            text = json.dumps(body)
            if task_id in text and _state(body):
                found.append(_state(body))
        return found


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    state = Webhook()

    async def hook(request: Request) -> Response:
        body = await request.json()
        state.arrived += 1
        with anyio.move_on_after(60):
            while not state.answering.is_set():  # noqa: ASYNC110 - set from the test's thread
                await anyio.sleep(0.02)
        state.bodies.append(body)
        return JSONResponse({"ok": True})

    with ServerThread(Starlette(routes=[Route("/hook", hook, methods=["POST"])]), name="webhook") as server:
        state.url = f"{server.url}/hook"
        try:
            yield state
        finally:
            state.answering.set()


def serve(config: Path, database_url: str, log: Path) -> ServerProcess:
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--db", database_url]
    command += ["--lease", "1", "--allow-private-outbound"]
    env = {**os.environ, "PYTHONPATH": str(TESTS), "RANCH_ADMIN_KEY": ADMIN_KEY}
    return ServerProcess(command, port, env=env, log_path=log.with_suffix(f".{port}.log"))


def test_the_updates_a_dead_replica_held_are_sent_by_another_in_order(
    database_url: str, tmp_path: Path, webhook: Webhook
) -> None:
    config = tmp_path / "push.yaml"
    config.write_text(CONFIG)
    with (
        serve(config, database_url, tmp_path / "first") as first,
        serve(config, database_url, tmp_path / "second"),
    ):
        message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "go"}]}
        push = {"url": webhook.url, "token": "tok", "id": "hook"}
        params = {"message": message, "configuration": {"taskPushNotificationConfig": push}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        answer = httpx.post(
            f"{first.url}/a2a/agents/relay", json=body, headers={"A2A-Version": "1.0"}, timeout=30
        ).json()
        task_id = answer["result"]["task"]["id"]
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert _state(held_bodies(database_url)[-1]) == "TASK_STATE_COMPLETED"  # held before told
        wait_until(lambda: webhook.arrived >= 1, what="the first notification on its way")
        first.kill()  # holding the first update (unanswered) and the ones behind it
        webhook.answering.set()
        wait_until(
            lambda: "TASK_STATE_COMPLETED" in webhook.states(task_id),
            timeout=TAKEN_OVER,
            what="the held updates sent by the live replica",
        )
        wait_until(lambda: not held_bodies(database_url), what="every update released once sent")
    states = webhook.states(task_id)
    assert states[-1] == "TASK_STATE_COMPLETED" and states.count("TASK_STATE_COMPLETED") == 1, states
    assert states == sorted(states, key=_order), states


def held_bodies(database_url: str) -> list[dict[str, Any]]:
    """The updates still in the outbox, in order."""

    async def read() -> list[dict[str, Any]]:
        engine = open_engine(database_url)
        try:
            async with engine.connect() as connection:
                rows = await connection.execute(select(push_outbox.c.body).order_by(push_outbox.c.seq))
                return [json.loads(bytes(row.body)) for row in rows]
        finally:
            await engine.dispose()

    return anyio.run(read)


def _state(body: dict[str, Any]) -> str:
    status = body.get("task", {}).get("status") or body.get("statusUpdate", {}).get("status") or {}
    return str(status.get("state", ""))


def _order(state: str) -> int:
    return ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"].index(state)
