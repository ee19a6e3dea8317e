"""`ranch.client.ExternalAgent`: an agent with no A2A server answers in rooms through the hub.

The example (`examples/external_agent.py`) runs as its own process against a real `ranch serve`,
is killed in the middle of a delivery, starts again, and the delivery is answered exactly once.
In process: answers streamed as `message.delta`s, the room history handed over, a failing handler
answered for, one delivery of a room at a time, and a graceful stop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from _support.hubkit import ADMIN_KEY, Api, serve_ranch, wait_until
from _support.servers import ServerProcess, free_port
from ranch.client import Delivery, EventView, ExternalAgent, Hub

ROOT = Path(__file__).parents[2]
EXAMPLE = ROOT / "examples" / "external_agent.py"


def start_agent(url: str, key: str, log: Path, think: float) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RANCH_URL": url, "RANCH_API_KEY": key, "THINK_SECONDS": str(think)}
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, str(EXAMPLE)], env=env, stdout=out, stderr=subprocess.STDOUT)


@pytest.fixture
def hub_process(database_url: str, tmp_path: Path) -> Iterator[ServerProcess]:
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", "--port", str(port), "--db", database_url]
    env = {**os.environ, "RANCH_ADMIN_KEY": ADMIN_KEY}
    with ServerProcess(command, port, env=env, log_path=tmp_path / "hub.log", name="ranch-serve") as server:
        yield server


def test_a_delivery_held_by_a_killed_agent_is_answered_exactly_once_after_restart(
    hub_process: ServerProcess, tmp_path: Path
) -> None:
    admin = Api(hub_process.url, ADMIN_KEY)
    key = admin.post("/agents", {"id": "shouter", "kind": "external"})["api_key"]
    room = admin.post("/rooms", {"title": "Shouts", "participants": [{"kind": "agent", "id": "shouter"}]})[
        "id"
    ]
    admin.post(f"/rooms/{room}/messages", {"text": "warm up"})  # history for the next one
    log = tmp_path / "agent.log"
    first = start_agent(hub_process.url, key, log, think=60)
    try:
        asked = admin.post(f"/rooms/{room}/messages", {"text": "@shouter hello there"})
        wait_until(lambda: "delivery " in log.read_text(), timeout=30, what="the agent to take the delivery")
        time.sleep(0.3)  # in the middle of it: thinking
    finally:
        first.kill()  # no goodbye: SIGKILL
        first.wait(timeout=10)
    assert [m for m in admin.messages(room) if m["sender"]["id"] == "shouter"] == []

    second = start_agent(hub_process.url, key, log, think=0)
    try:

        def replies() -> list[dict[str, Any]]:
            return [m for m in admin.messages(room) if m["sender"]["id"] == "shouter"]

        wait_until(lambda: len(replies()) == 1, timeout=30, what="the answer after the restart")
        admin.post(f"/rooms/{room}/messages", {"text": "@shouter and again"})
        wait_until(lambda: len(replies()) == 2, timeout=30, what="the next answer")
        answers = [m["text"] for m in replies()]
        assert answers == [
            "@SHOUTER HELLO THERE! (1 earlier messages seen)",
            "@SHOUTER AND AGAIN! (3 earlier messages seen)",
        ]
        assert replies()[0]["cursor"] > asked["cursor"]
        inbox = httpx.get(
            f"{hub_process.url}/api/v1/agent/messages/next", headers={"X-API-Key": key}, timeout=10
        )
        assert inbox.status_code == 204  # nothing left unacknowledged
        wait_until(lambda: admin.execution_status(room, "shouter") == "ready", what="its execution ready")
    finally:
        second.terminate()  # SIGTERM: a graceful stop
        assert second.wait(timeout=30) == 0


def test_streamed_answers_history_failures_and_order_in_process(database_url: str) -> None:
    with serve_ranch("agents: []\n", database_url) as server:
        admin = Api(server.url, ADMIN_KEY)
        key = admin.post("/agents", {"id": "helper", "kind": "external", "history_length": 1})["api_key"]
        rooms = [
            admin.post("/rooms", {"title": f"R{n}", "participants": [{"kind": "agent", "id": "helper"}]})[
                "id"
            ]
            for n in range(2)
        ]
        handled: list[tuple[str, str, list[str]]] = []

        async def handler(delivery: Delivery) -> Any:
            handled.append((delivery.room_id, delivery.text, [m.text for m in delivery.history]))
            if "boom" in delivery.text:
                raise RuntimeError("the model fell over")
            if "stream" in delivery.text:
                return pieces()
            if "quiet" in delivery.text:
                return None
            await anyio.sleep(0.2)
            return [{"text": f"done: {delivery.text}"}, {"data": {"seen": len(delivery.history)}}]

        async def pieces() -> AsyncIterator[str]:
            for piece in ("one ", "two ", "three"):
                await anyio.sleep(0.05)
                yield piece

        async def scenario() -> None:
            agent = ExternalAgent(handler, url=server.url, key=key)
            async with Hub(server.url, ADMIN_KEY) as hub, anyio.create_task_group() as group:
                stream = hub.events([rooms[0]])
                deltas: list[str] = []

                async def watch() -> None:
                    async for event in stream:
                        if isinstance(event, EventView) and event.type == "message.delta":
                            deltas.append(event.data["text"])

                group.start_soon(watch)
                await stream.connected.wait()
                group.start_soon(agent.serve)
                for text in (
                    "@helper first",
                    "@helper second",
                    "@helper please stream",
                    "@helper boom",
                    "@helper quiet",
                ):
                    await hub.post(rooms[0], text)
                await hub.post(rooms[1], "@helper elsewhere")
                with anyio.fail_after(20):
                    while agent.answered < 6:  # noqa: ASYNC110 - a count, not an event
                        await anyio.sleep(0.05)
                agent.stop()
                await stream.aclose()
                texts = [m.text for m in await hub.messages(rooms[0]) if m.sender.id == "helper"]
                assert texts == [
                    "done: @helper first",
                    "done: @helper second",
                    "one two three",
                    "I could not answer this (RuntimeError).",
                ]  # in order, one at a time; "quiet" acknowledged without an answer
                assert deltas == ["one ", "two ", "three"]
                data = [m.parts[0]["data"] for m in await hub.messages(rooms[0]) if m.parts]
                assert data == [{"seen": 0}, {"seen": 1}]
                in_room = [text for room, text, _ in handled if room == rooms[0]]
                assert in_room == [
                    "@helper first",
                    "@helper second",
                    "@helper please stream",
                    "@helper boom",
                    "@helper quiet",
                ]
                second = next(history for room, text, history in handled if text == "@helper second")
                assert second == ["@helper first"]  # history_length 1: the one message before it
                assert await hub.executions(rooms[1])

        anyio.run(scenario)


def test_a_stop_gives_the_delivery_in_hand_its_grace_then_leaves_it_for_the_next_start(
    database_url: str,
) -> None:
    with serve_ranch("agents: []\n", database_url) as server:
        admin = Api(server.url, ADMIN_KEY)
        key = admin.post("/agents", {"id": "helper", "kind": "external"})["api_key"]
        room = admin.post("/rooms", {"title": "Slow", "participants": [{"kind": "agent", "id": "helper"}]})[
            "id"
        ]
        started: list[str] = []

        async def handler(delivery: Delivery) -> str:
            started.append(delivery.text)
            if "slow" in delivery.text:
                await anyio.sleep(30)
            return "ok"

        async def scenario() -> None:
            agent = ExternalAgent(handler, url=server.url, key=key, grace_s=0.5)
            async with Hub(server.url, ADMIN_KEY) as hub, anyio.create_task_group() as group:
                group.start_soon(agent.serve)
                await hub.post(room, "@helper quick")
                with anyio.fail_after(15):
                    while agent.answered < 1:  # noqa: ASYNC110 - a count, not an event
                        await anyio.sleep(0.05)
                await hub.post(room, "@helper slow one")
                with anyio.fail_after(15):
                    while len(started) < 2:  # noqa: ASYNC110 - a list, not an event
                        await anyio.sleep(0.05)
                began = time.monotonic()
                agent.stop()
            assert time.monotonic() - began < 3  # its grace (0.5 s), not the handler's 30 s
            async with Hub(server.url, key) as inbox:
                left = await inbox.next_delivery()
            assert left is not None and left.message.text == "@helper slow one"  # for the next start

        anyio.run(scenario)
