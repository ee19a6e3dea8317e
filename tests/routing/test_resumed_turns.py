"""Durable turns: a team turn whose server is killed (`kill -9`) goes on from its last hop.

A team of three remote members built with the a2a-sdk (`gated` peers: each opens its task, then works
until the test lets it answer), routed a -> b -> c. The server is killed while a member works; the
replica that takes the task over (another process on PostgreSQL and Redis, or the same database
restarted on SQLite) re-attaches to that member's own task instead of sending it the message again,
and the turn completes as the same task: every hop once in its trail, every member sent one message,
a subscriber on the surviving replica sees the whole stream, and the task's webhook is told of every
hop once, in order. A team answering in a room goes on
the same way, as the same execution. (A local member's hop in flight: test_resumed_local_hops.py.)
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from functools import partial
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

from _support.databases import migrated_sqlite
from _support.hubkit import ADMIN_KEY, Api, wait_until
from _support.killable import killable_serve, rpc
from _support.peers import CARD_PATH, RunningPeer, running_peer
from _support.servers import ServerThread
from ranch.db.engine import open_engine
from ranch.db.models import turn_checkpoints
from ranch.wire.client_routing import URI

MEMBERS = ("a", "b", "c")
TAKEN_OVER = 30.0
"""Seconds the turn may take to complete once taken over: the lease (1 s), a take-over round, the
remaining hops, and room for a loaded machine."""


def team_config(peers: dict[str, RunningPeer], fresh_card: str = "") -> str:
    """The trio; `fresh_card` names a member whose card is read before every call (card_ttl 0)."""
    ttl = {fresh_card: ", card_ttl: 0"} if fresh_card else {}
    agents = "".join(
        f"  - {{id: {name}, kind: remote, url: '{peers[name].url}'{ttl.get(name, '')}}}\n" for name in MEMBERS
    )
    return (
        f"agents:\n{agents}"
        "teams:\n"
        "  - {id: trio, members: [a, b, c], default_agent: a, routes: {a: b, b: c}, timeout: 120}\n"
    )


@pytest.fixture
def gated() -> Iterator[tuple[dict[str, RunningPeer], dict[str, threading.Event]]]:
    """The members, and the gates that let each answer; `card:<name>` holds the reads of its card
    while it is set."""
    gates = {name: threading.Event() for name in MEMBERS}
    holds = {f"card:{name}": threading.Event() for name in MEMBERS}
    with ExitStack() as stack:
        peers = {
            name: stack.enter_context(
                running_peer("gated", gate=gates[name], name=name, card_hold=holds[f"card:{name}"])
            )
            for name in MEMBERS
        }
        try:
            yield peers, {**gates, **holds}
        finally:
            for hold in holds.values():
                hold.clear()
            for gate in gates.values():
                gate.set()


def start_turn(url: str, words: str, webhook: str = "", *, team: str = "trio") -> str:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": words}]}
    configuration: dict[str, Any] = {"returnImmediately": True}
    if webhook:
        configuration["taskPushNotificationConfig"] = {"url": webhook, "token": "tok", "id": "hook"}
    params = {"message": message, "configuration": configuration}
    task_id: str = rpc(f"{url}/a2a/agents/{team}", "SendMessage", params)["task"]["id"]
    return task_id


def checkpoint(database_url: str, task_id: str) -> dict[str, Any] | None:
    """The turn's checkpoint as stored, None when there is none."""

    async def read() -> dict[str, Any] | None:
        engine = open_engine(database_url)
        try:
            async with engine.connect() as connection:
                query = select(turn_checkpoints.c.state).where(turn_checkpoints.c.task_id == task_id)
                found = await connection.scalar(query)
                return dict(found) if found is not None else None
        finally:
            await engine.dispose()

    return anyio.run(read)


def in_flight_with_its_task(database_url: str, task_id: str, member: str) -> bool:
    """The checkpoint says `member` is working on the turn's hop as a task of its own."""
    state = checkpoint(database_url, task_id)
    return state is not None and state["way"]["target"] == member and bool(state["memberTask"])


def completed(url: str, task_id: str, team: str = "trio") -> dict[str, Any] | None:
    task = rpc(f"{url}/a2a/agents/{team}", "GetTask", {"id": task_id})
    return task if task["status"]["state"] == "TASK_STATE_COMPLETED" else None


def run_until(member: str, peers: dict[str, RunningPeer], gates: dict[str, threading.Event]) -> None:
    """Let every member before `member` answer: `member` then has the message, and works."""
    for name in MEMBERS[: MEMBERS.index(member)]:
        gates[name].set()
    peers[member].recorder.wait_for_messages(1, timeout=TAKEN_OVER)


def check_turn(
    task: dict[str, Any], peers: dict[str, RunningPeer], words: str, names: Sequence[str] = MEMBERS
) -> None:
    trail = task["metadata"][URI]["trail"]
    assert [hop["agent"] for hop in trail] == list(names), trail
    said = task["status"]["message"]["parts"][0]["text"]  # each member saw its peers' answers
    assert said.startswith("c saw:") and "b saw:" in said and said.endswith(f"a saw: {words}"), said
    for name in MEMBERS:  # the one in flight was re-attached to, not sent the message again
        assert len(peers[name].recorder.messages) == 1, (name, peers[name].recorder.messages)


def test_a_turn_killed_in_a_remote_hop_goes_on_from_there_after_a_restart(
    tmp_path: Path, gated: tuple[dict[str, RunningPeer], dict[str, threading.Event]]
) -> None:
    peers, gates = gated
    config = tmp_path / "trio.yaml"
    config.write_text(team_config(peers))
    database_url = f"sqlite+aiosqlite:///{migrated_sqlite(tmp_path / 'hub.db')}"
    with killable_serve(config, database_url, tmp_path / "first") as first:
        task_id = start_turn(first.url, "hello")
        run_until("b", peers, gates)
        wait_until(
            lambda: in_flight_with_its_task(database_url, task_id, "b"), what="b's task in the checkpoint"
        )
        first.kill()
    gates["b"].set()  # b finishes while no server runs: the restarted one finds its task completed
    with killable_serve(config, database_url, tmp_path / "second") as second:
        peers["c"].recorder.wait_for_messages(1, timeout=TAKEN_OVER)
        gates["c"].set()
        task = wait_until(lambda: completed(second.url, task_id), timeout=TAKEN_OVER, what="the resumed turn")
    check_turn(task, peers, "hello")
    replies = [artifact["metadata"]["ranch.hop"]["hop"] for artifact in task["artifacts"]]
    assert replies == [1, 2, 3], task["artifacts"]  # those told before the stop are kept
    assert checkpoint(database_url, task_id) is None  # gone with the task's end


def test_a_turn_killed_between_a_hops_checkpoint_and_its_message_sends_it_once_after_a_restart(
    tmp_path: Path, gated: tuple[dict[str, RunningPeer], dict[str, threading.Event]]
) -> None:
    peers, gates = gated
    config = tmp_path / "trio.yaml"
    config.write_text(team_config(peers, fresh_card="b"))  # b's card is read just before b is called
    database_url = f"sqlite+aiosqlite:///{migrated_sqlite(tmp_path / 'hub.db')}"
    with killable_serve(config, database_url, tmp_path / "first") as first:
        task_id = start_turn(first.url, "hello")
        peers["a"].recorder.wait_for_messages(1, timeout=TAKEN_OVER)
        reads = card_reads(peers["b"])
        gates["card:b"].set()
        gates["a"].set()
        wait_until(lambda: card_reads(peers["b"]) > reads, what="the hop to b held before its message")
        state = checkpoint(database_url, task_id)
        assert state is not None and (state["way"]["target"], state["memberTask"]) == ("b", "")
        first.kill()
    assert peers["b"].recorder.messages == []
    gates["card:b"].clear()
    with killable_serve(config, database_url, tmp_path / "second") as second:
        peers["b"].recorder.wait_for_messages(1, timeout=TAKEN_OVER)  # the hop made now, from its checkpoint
        gates["b"].set()
        gates["c"].set()
        task = wait_until(lambda: completed(second.url, task_id), timeout=TAKEN_OVER, what="the resumed turn")
    check_turn(task, peers, "hello")


def card_reads(peer: RunningPeer) -> int:
    return sum(request.path == CARD_PATH for request in peer.recorder.requests)


def trios_config(trios: list[dict[str, RunningPeer]]) -> str:
    """Teams trio1, trio2, ...: each its own members a1 -> b1 -> c1, ..."""
    agents, teams = [], []
    for n, peers in enumerate(trios, 1):
        agents += [f"  - {{id: {role}{n}, kind: remote, url: '{peers[role].url}'}}\n" for role in MEMBERS]
        members = ", ".join(f"{role}{n}" for role in MEMBERS)
        team = f"id: trio{n}, members: [{members}], default_agent: a{n}, routes: {{a{n}: b{n}, b{n}: c{n}}}"
        teams.append(f"  - {{{team}, timeout: 120}}\n")
    return "agents:\n" + "".join(agents) + "teams:\n" + "".join(teams)


@pytest.fixture
def three_trios() -> Iterator[list[tuple[dict[str, RunningPeer], dict[str, threading.Event]]]]:
    """Three teams' members, each member answering once its gate is set."""
    with ExitStack() as stack:
        trios = []
        for _ in range(3):
            gates = {role: threading.Event() for role in MEMBERS}
            peers = {
                role: stack.enter_context(running_peer("gated", gate=gates[role], name=role))
                for role in MEMBERS
            }
            trios.append((peers, gates))
        try:
            yield trios
        finally:
            for _, gates in trios:
                for gate in gates.values():
                    gate.set()


def test_the_replica_taking_over_resumes_each_turn_and_its_subscriber_sees_every_hop_once(
    postgres_url: str,
    tmp_path: Path,
    three_trios: list[tuple[dict[str, RunningPeer], dict[str, threading.Event]]],
    webhook: Webhook,
) -> None:
    """Three turns, killed with their replica in hop 1, 2 and 3."""
    config = tmp_path / "trios.yaml"
    config.write_text(trios_config([peers for peers, _ in three_trios]))
    prefix = f"ranch-test-{uuid.uuid4().hex[:8]}"
    with (
        killable_serve(config, postgres_url, tmp_path / "first", redis=prefix) as first,
        killable_serve(config, postgres_url, tmp_path / "second", redis=prefix) as second,
    ):
        turns = []
        for n, ((peers, gates), member) in enumerate(zip(three_trios, MEMBERS, strict=True), 1):
            team = f"trio{n}"
            task_id = start_turn(first.url, "hi", webhook.url, team=team)
            watcher = Subscriber(f"{second.url}/a2a/agents/{team}", task_id)
            run_until(member, peers, gates)
            turns.append((team, task_id, watcher, peers, f"{member}{n}"))
        for _, task_id, _, _, member in turns:
            wait_until(
                partial(in_flight_with_its_task, postgres_url, task_id, member), what=f"{member}'s task"
            )
        first.kill()  # holding the webhook updates not yet answered
        webhook.answering.set()
        for _, gates in three_trios:
            for role in MEMBERS:
                gates[role].set()
        ended, told = {}, {}
        for team, task_id, watcher, _, _ in turns:
            ended[task_id] = wait_until(
                partial(completed, second.url, task_id, team),
                timeout=TAKEN_OVER,
                what=f"{team}'s resumed turn",
            )
            watcher.join()
            told[task_id] = wait_until(  # while the replica is up: the webhook answers slowly
                partial(webhook.hops, task_id), timeout=TAKEN_OVER, what=f"{team}'s webhook told of the end"
            )
    for n, (_team, task_id, watcher, peers, member) in enumerate(turns, 1):
        task = ended[task_id]
        check_turn(task, peers, "hi", [f"{role}{n}" for role in MEMBERS])
        replies = [artifact["metadata"]["ranch.hop"]["hop"] for artifact in task["artifacts"]]
        assert replies == [1, 2, 3], (member, task["artifacts"])  # those told before the stop are kept
        assert watcher.hops("working") == [1, 2, 3], (member, watcher.events)  # once each, across the stop
        assert watcher.hops("reply") == [1, 2, 3], (member, watcher.events)
        assert watcher.final == "TASK_STATE_COMPLETED"
        hops = told[task_id]  # every hop, in order, across the stop (one in flight may come twice)
        assert sorted(set(hops)) == [1, 2, 3] and hops == sorted(hops), (member, hops)


class Webhook:
    """Records the push notifications of tasks, in the order they are answered; holds each until
    `answering` is set (so a replica killed meanwhile leaves updates in its outbox), then answers
    slowly (so the resumed run's updates come while those are still being sent)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.bodies: list[dict[str, Any]] = []
        self.answering = threading.Event()

    def hops(self, task_id: str) -> list[int] | None:
        """The hops the task's WORKING updates announced, once its COMPLETED one came (None before)."""
        states = [
            body["statusUpdate"]["status"]
            for body in self.bodies
            if body.get("statusUpdate", {}).get("taskId") == task_id
        ]
        if not any(status.get("state") == "TASK_STATE_COMPLETED" for status in states):
            return None
        numbers = []
        for status in states:
            hop = status.get("message", {}).get("metadata", {}).get("ranch.hop")
            if status.get("state") == "TASK_STATE_WORKING" and hop is not None:
                numbers.append(int(hop["hop"]))
        return numbers


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook("")

    async def receive(request: Request) -> Response:
        body = await request.json()
        with anyio.move_on_after(60):
            while not hook.answering.is_set():  # noqa: ASYNC110 - set from the test's thread
                await anyio.sleep(0.02)
        await anyio.sleep(0.05)  # a slow webhook: what the stopped replica held is still being sent
        hook.bodies.append(body)
        return JSONResponse({"ok": True})

    app = Starlette(routes=[Route("/hook", receive, methods=["POST"])])
    with ServerThread(app, name="webhook") as server:
        hook.url = f"{server.url}/hook"
        try:
            yield hook
        finally:
            hook.answering.set()


class Subscriber:
    """SubscribeToTask on one replica, read in a thread until the task's final status."""

    def __init__(self, url: str, task_id: str) -> None:
        self.events: list[dict[str, Any]] = []
        self.final = ""
        self._thread = threading.Thread(target=self._read, args=(url, task_id), daemon=True)
        self._thread.start()
        wait_until(lambda: self.events, what="the subscription's first event")

    def _read(self, url: str, task_id: str) -> None:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
        headers = {"A2A-Version": "1.0", "Accept": "text/event-stream"}
        with httpx.stream("POST", url, json=body, headers=headers, timeout=TAKEN_OVER * 2) as response:
            for line in response.iter_lines():
                if not line.startswith("data:"):
                    continue
                result = json.loads(line[5:])["result"]
                self.events.append(result)
                state = result.get("statusUpdate", {}).get("status", {}).get("state", "")
                if state in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED"):
                    self.final = state
                    return

    def join(self) -> None:
        self._thread.join(TAKEN_OVER)
        assert not self._thread.is_alive(), "the subscription never ended"

    def hops(self, kind: str) -> list[int]:
        """The hop numbers the stream announced (`working`) or answered (`reply`), in order."""
        numbers = []
        for index, event in enumerate(self.events):
            if kind == "working" and ("statusUpdate" in event or (index == 0 and "task" in event)):
                status = (event.get("statusUpdate") or event["task"])["status"]  # first: the task as it was
                hop = status.get("message", {}).get("metadata", {}).get("ranch.hop")
            elif kind == "reply" and "artifactUpdate" in event and event["artifactUpdate"].get("lastChunk"):
                hop = event["artifactUpdate"]["artifact"].get("metadata", {}).get("ranch.hop")
            else:
                continue
            if hop is not None:
                numbers.append(int(hop["hop"]))
        return numbers


def test_a_teams_turn_in_a_room_goes_on_after_a_restart(
    tmp_path: Path, gated: tuple[dict[str, RunningPeer], dict[str, threading.Event]]
) -> None:
    peers, gates = gated
    config = tmp_path / "trio.yaml"
    config.write_text(team_config(peers))
    database_url = f"sqlite+aiosqlite:///{migrated_sqlite(tmp_path / 'hub.db')}"
    with killable_serve(config, database_url, tmp_path / "first") as first:
        admin = Api(first.url, ADMIN_KEY)
        room = admin.post("/rooms", {"title": "Durable", "participants": [{"kind": "agent", "id": "trio"}]})[
            "id"
        ]
        admin.post(f"/rooms/{room}/messages", {"text": "@trio hello"})
        run_until("b", peers, gates)
        execution = admin.executions(room)["trio"]["id"]
        wait_until(
            lambda: in_flight_with_its_task(database_url, execution, "b"), what="b's task in the checkpoint"
        )
        first.kill()
    with killable_serve(config, database_url, tmp_path / "second") as second:
        admin = Api(second.url, ADMIN_KEY)
        gates["b"].set()  # b answers the replica that re-attached to its task
        peers["c"].recorder.wait_for_messages(1, timeout=TAKEN_OVER)
        gates["c"].set()
        answered = wait_until(
            lambda: [m for m in admin.messages(room) if m["text"].startswith("c saw:")],
            timeout=TAKEN_OVER,
            what="the team's answer in the room",
        )
        wait_until(lambda: admin.executions(room)["trio"]["status"] == "ready", what="the execution ready")
        assert admin.executions(room)["trio"]["id"] == execution  # the same execution went on
    assert len(answered) == 1, answered
    for name in MEMBERS:  # b, in flight at the stop, was re-attached to
        assert len(peers[name].recorder.messages) == 1, (name, peers[name].recorder.messages)
    assert checkpoint(database_url, execution) is None
