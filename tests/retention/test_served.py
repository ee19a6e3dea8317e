"""Retention as clients see it: a pruned task answers TaskNotFound like any unknown task, and a
WebSocket cursor older than a room's oldest kept event gets an error naming where to resume."""

from __future__ import annotations

import time
import uuid
from typing import Any

import anyio
import httpx
from sqlalchemy import func, select, update

from _support.hubkit import ADMIN_KEY, Api, Live, RunningRanch, serve_ranch, wait_until
from ranch.config import RetentionConfig
from ranch.db.engine import open_engine
from ranch.db.models import RoomEvent, ranch_tasks
from ranch.retention.pruner import Pruner

CONFIG = """
agents:
  - id: greeter
    kind: rules
    rules: [{reply: "Hello: {text}"}]
teams:
  - id: desk
    members: [greeter]
    default_agent: greeter
"""
V1 = {"A2A-Version": "1.0"}
TASK_NOT_FOUND = -32001
YEAR_AGO = time.time() - 365 * 86400


def rpc(hub: RunningRanch, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(hub.agent_url("desk"), json=body, headers=V1, timeout=20)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def on_database(url: str, statement: Any) -> Any:
    """Run one statement on the hub's database (a connection of its own), its result's scalar."""

    async def run() -> Any:
        engine = open_engine(url)
        try:
            async with engine.begin() as connection:
                result = await connection.execute(statement)
                return result.scalar() if result.returns_rows else None
        finally:
            await engine.dispose()

    return anyio.run(run)


def test_the_hubs_rounds_prune_a_finished_task_which_then_answers_task_not_found(database_url: str) -> None:
    retention = RetentionConfig(tasks="1d", every=1)
    with serve_ranch(CONFIG, database_url, retention=retention) as hub:
        message = {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": "hi"}]}
        done = rpc(hub, "SendMessage", {"message": message})["result"]["task"]
        kept = rpc(hub, "SendMessage", {"message": {**message, "messageId": str(uuid.uuid4())}})["result"][
            "task"
        ]
        assert rpc(hub, "GetTask", {"id": done["id"]})["result"]["id"] == done["id"]
        wait_until(
            lambda: on_database(hub.database_url, select(func.count()).select_from(ranch_tasks)) == 2,
            what="both tasks stored",
        )
        on_database(  # its last status change a year ago: past the lifetime, pruned by the next round
            hub.database_url,
            update(ranch_tasks).where(ranch_tasks.c.id == done["id"]).values(updated_ns=int(YEAR_AGO * 1e9)),
        )

        gone = wait_until(
            lambda: (answer := rpc(hub, "GetTask", {"id": done["id"]})).get("error") and answer,
            what="the pruned task to answer an error",
        )

        assert gone["error"]["code"] == TASK_NOT_FOUND, gone
        unknown = rpc(hub, "GetTask", {"id": str(uuid.uuid4())})
        assert unknown["error"]["code"] == TASK_NOT_FOUND  # as any unknown task
        assert rpc(hub, "GetTask", {"id": kept["id"]})["result"]["id"] == kept["id"]


def test_a_websocket_cursor_older_than_the_oldest_kept_event_is_told_where_to_resume(
    database_url: str,
) -> None:
    with serve_ranch("agents: []\n", database_url, caller_rate=None) as hub:
        api = Api(hub.url, ADMIN_KEY)
        room = api.post("/rooms", {"title": "history"})["id"]
        for n in range(5):
            api.post(f"/rooms/{room}/messages", {"text": f"message {n}"})
        cursors = [event["cursor"] for event in api.get(f"/rooms/{room}/events", since=0, limit=200)["items"]]
        old = cursors[: len(cursors) // 2]
        on_database(
            hub.database_url,
            update(RoomEvent)
            .where(RoomEvent.room_id == room, RoomEvent.cursor.in_(old))
            .values(created_at=YEAR_AGO),
        )

        async def prune() -> None:
            engine = open_engine(hub.database_url)
            try:
                result = await Pruner(engine, RetentionConfig(events="30d")).run()
                assert result.counts["events"] == len(old)
            finally:
                await engine.dispose()

        anyio.run(prune)
        live = Live(hub.url, ADMIN_KEY)
        try:
            live.send({"type": "subscribe", "rooms": {room: 0}})
            refused = live.recv()
            assert refused["type"] == "error" and refused["error"]["code"] == "CONFLICT", refused
            assert refused["room"] == room and refused["oldest_cursor"] == old[-1]
            assert f"resume from cursor {old[-1]}" in refused["error"]["message"]
            assert refused["error"]["field"] == f"rooms.{room}"

            resumed = live.subscribe_from({room: old[-1]})  # from there on, the kept events
            assert resumed["replayed"] == len(cursors) - len(old)
            replay = live.until(lambda frame: frame.get("cursor") == cursors[-1])
            assert [frame["cursor"] for frame in replay if "cursor" in frame] == cursors[len(old) :]
        finally:
            live.connection.close()
