"""Three replicas behind HAProxy, started as `make cluster` starts them, used as one server.

Real processes: scripts/cluster.py runs three `ranch serve` on one PostgreSQL database and one
Redis prefix, with `--lease 2`, behind HAProxy from Debian's packages. Through the balancer, a
room's events reach a WebSocket on any replica in order; under a bounded load, one replica is
killed with SIGKILL: no task a caller was told about is lost, every task ends in a final state,
and the dead replica's running tasks are taken over within the lease. PostgreSQL, Redis and
HAProxy are needed; without them these tests fail, saying so. Behind the balancer, a client's
address is the one HAProxy saw, whatever X-Forwarded-For it sends, and a half-sent request is
timed out.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from _support.cluster import Cluster, running_cluster
from _support.databases import fresh_postgres
from _support.hubkit import ADMIN_KEY, Api, Live, wait_until
from _support.sockets import client_from, connect_from, read_to_end, refused_keys

CONFIG = """
agents:
  - id: scribe
    kind: rules
    rules:
      - {reply: "noted: {text}"}
  - id: worker
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 0.15, reply: "done: {text}", task: true}
  - id: sleeper
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 60, reply: "too late", task: true}
"""
LEASE = 2.0
CALLERS = 3
CALLS = 30
"""SendMessage calls per caller thread (the load is bounded in count, and in time by LOAD_LIMIT)."""
LOAD_LIMIT = 60.0
TAKEN_OVER = 10.0
"""Seconds from kill -9 to the dead replica's running tasks ending FAILED: the lease (2 s), a
take-over round (1 s) and room for a loaded machine; bench/README measures it."""


def rpc(url: str, method: str, params: dict[str, Any], timeout: float = 30) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    return httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=timeout)


def message(text: str) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}


def get_task(cluster: Cluster, task_id: str, agent: str = "worker") -> dict[str, Any]:
    """GetTask through the balancer; asked again when the balancer itself could not answer (a 5xx
    of HAProxy's while it notices the dead replica: GetTask is safe to repeat)."""
    for _attempt in range(5):
        response = rpc(f"{cluster.url}/a2a/agents/{agent}", "GetTask", {"id": task_id})
        if response.status_code < 500:
            break
        time.sleep(0.5)
    answer = response.json()
    assert "result" in answer, answer
    task: dict[str, Any] = answer["result"]
    return task


def answer_text(task: dict[str, Any]) -> str:
    """What a task answered: its status message, else its artifacts."""
    parts = task["status"].get("message", {}).get("parts") or [
        part for artifact in task.get("artifacts", []) for part in artifact["parts"]
    ]
    return " ".join(part.get("text", "") for part in parts)


@dataclass
class Load:
    """What the callers were told: tasks answered COMPLETED, and calls that failed on the way."""

    completed: dict[str, str] = field(default_factory=dict)
    """task id -> the text the caller was answered with."""
    refused: list[str] = field(default_factory=list)
    after_kill: int = 0
    killed_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def call(self, cluster: Cluster, caller: int, deadline: float) -> None:
        for n in range(CALLS):
            if time.monotonic() > deadline:
                return
            text = f"c{caller}-{n}"
            try:
                answer = rpc(f"{cluster.url}/a2a/agents/worker", "SendMessage", {"message": message(text)})
                task = answer.json()["result"]["task"]
            except (httpx.HTTPError, ValueError, KeyError) as exc:  # died with its replica: not acknowledged
                with self.lock:
                    self.refused.append(f"{text}: {exc!r}")
                continue
            with self.lock:
                if task["status"]["state"] == "TASK_STATE_COMPLETED":
                    self.completed[task["id"]] = answer_text(task)
                    self.after_kill += self.killed_at is not None
                else:
                    self.refused.append(f"{text}: {task['status']['state']}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """Three replicas for this module's room test, then its kill test (the last: it kills one).
    Every caller is 127.0.0.1: on a fast run the load alone would empty the caller's budget (50/s)
    and the test's own GetTask would be refused RATE_LIMITED (tests/policy test the limits)."""
    logs = tmp_path_factory.mktemp("cluster")
    unlimited = ("--caller-rate", "off")
    with (
        fresh_postgres() as url,
        running_cluster(CONFIG, url, logs, lease=LEASE, serve=unlimited) as started,
    ):
        yield started


def test_a_room_through_the_balancer_reaches_a_watcher_on_every_replica(cluster: Cluster) -> None:
    through = Api(cluster.url, ADMIN_KEY)
    scribe = {"kind": "agent", "id": "scribe"}
    room = through.post("/rooms", {"title": "Ops", "participants": [scribe], "default_agent": "scribe"})["id"]
    watchers = [Live(replica.url, ADMIN_KEY) for replica in cluster.replicas]
    for live in watchers:
        wait_until(partial(_subscribed, live, room), what="the room known on every replica")
    for n in range(6):  # the room's replica takes them; the others hear of them
        through.post(f"/rooms/{room}/messages", {"text": f"m{n}"})
    wait_until(lambda: len(through.messages(room)) == 12, what="every reply")
    log = [event["cursor"] for event in through.get(f"/rooms/{room}/events", limit=200)["items"]]
    for live in watchers:
        frames = live.until(lambda f: f.get("cursor") == log[-1], timeout=20)
        assert [f["cursor"] for f in frames if f.get("cursor") is not None] == log
        live.close()


def test_the_balancer_sends_each_rooms_calls_to_one_replica(cluster: Cluster) -> None:
    through = Api(cluster.url, ADMIN_KEY)
    served: dict[str, set[str]] = {}
    for n in range(8):  # named rooms: where each goes is the same on every run
        room = through.post("/rooms", {"id": f"affinity-{n}"})["id"]
        calls = [
            through.call("POST", f"/rooms/{room}/messages", {"text": "hello"}),
            through.call("POST", f"/rooms/{room}/messages", {"text": "again"}),
            through.call("GET", f"/rooms/{room}/messages"),
            through.call("GET", f"/rooms/{room}"),
        ]
        assert all(answer.status_code < 300 for answer in calls), [answer.text for answer in calls]
        served[room] = {answer.headers["x-ranch-replica"] for answer in calls}
    assert all(len(replicas) == 1 for replicas in served.values()), served
    assert len(set().union(*served.values())) > 1, served  # the rooms are spread over the replicas
    others = {through.call("GET", "/me").headers["x-ranch-replica"] for _ in range(6)}
    assert len(others) == len(cluster.replicas)  # every other call: round robin


def _subscribed(live: Live, room: str) -> bool:
    live.send({"type": "subscribe", "rooms": [room], "cursor": 0})
    frame = live.recv()
    return bool(frame["type"] == "subscribed")


def _final_task(cluster: Cluster, task_id: str) -> dict[str, Any] | None:
    """The sleeper's task once it has ended."""
    task = get_task(cluster, task_id, "sleeper")
    return None if task["status"]["state"] in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"} else task


BUDGET = 3
"""Refused keys one client address may present (`--auth-failure-burst`), refilled too slowly to matter."""
CAP = 5
"""Connections one client address may hold at the balancer (`--max-connections-per-address`)."""
HEAD_TIMEOUT = 2.0


def test_the_balancer_says_who_the_client_is_and_times_out_half_sent_requests(
    postgres_url: str, tmp_path: Path
) -> None:
    """Clients are loopback addresses other than 127.0.0.1 (HAProxy's, which the replicas trust)."""
    serve = ["--auth", "keys", "--auth-failure-burst", str(BUDGET), "--auth-failure-rate", "0.001"]
    options = ["--head-timeout", f"{HEAD_TIMEOUT:g}", "--max-connections-per-address", str(CAP)]
    with running_cluster(
        CONFIG, postgres_url, tmp_path / "cluster", replicas=2, options=options, serve=serve
    ) as cluster:
        port = int(cluster.url.rsplit(":", 1)[1])
        # a client that forges X-Forwarded-For still spends its own address's budget ...
        forged = [f"203.0.113.{n}" for n in range(BUDGET + 2)]
        assert refused_keys(cluster.url, "127.0.0.20", forged) == [401] * BUDGET + [429] * 2
        # ... and cannot spend another's: naming 127.0.0.21 locks out nobody but itself
        assert refused_keys(cluster.url, "127.0.0.20", ["127.0.0.21"] * BUDGET) == [429] * BUDGET
        assert refused_keys(cluster.url, "127.0.0.21", ["127.0.0.20"], key=ADMIN_KEY) == [200]
        with client_from("127.0.0.21") as other:  # on A2A too
            answer = other.post(
                f"{cluster.url}/a2a/agents/scribe",
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "SendMessage",
                    "params": {"message": message("hi")},
                },
                headers={"A2A-Version": "1.0", "X-API-Key": ADMIN_KEY},
            )
            assert answer.json()["result"]["message"]["parts"][0]["text"] == "noted: hi"

        # a half-sent request is answered 408 and closed after the head timeout; others are served
        half_sent = connect_from("127.0.0.22", port)
        half_sent.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        with client_from("127.0.0.23") as client:
            assert client.get(f"{cluster.url}/healthz").status_code == 200
        assert (read_to_end(half_sent, HEAD_TIMEOUT + 15) or b"").startswith(b"HTTP/1.1 408 ")
        half_sent.close()

        # one address holds at most CAP connections at the balancer; another is still served
        held = [connect_from("127.0.0.24", port) for _ in range(CAP)]
        for sock in held:  # each answered, and kept alive
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200 ")
        over = connect_from("127.0.0.24", port)
        with contextlib.suppress(OSError):  # it may be closed already
            over.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_to_end(over, 10) == b"", "the balancer closes the connection over the cap, unanswered"
        with client_from("127.0.0.25") as client:
            assert client.get(f"{cluster.url}/healthz").status_code == 200
        for sock in [*held, over]:
            sock.close()


def test_kill_9_of_a_replica_under_load_loses_no_acknowledged_task(cluster: Cluster) -> None:
    """The module's last test: it kills a replica of the module's cluster."""
    victim = cluster.replicas[1]
    # tasks that will still be running on the victim when it dies
    running = []
    for n in range(3):
        params = {"message": message(f"long {n}"), "configuration": {"returnImmediately": True}}
        running.append(
            rpc(f"{victim.url}/a2a/agents/sleeper", "SendMessage", params).json()["result"]["task"]
        )
    load = Load()
    deadline = time.monotonic() + LOAD_LIMIT
    callers = [threading.Thread(target=load.call, args=(cluster, n, deadline)) for n in range(CALLERS)]
    for caller in callers:
        caller.start()
    wait_until(lambda: len(load.completed) >= CALLS // 2, timeout=LOAD_LIMIT, what="the load under way")
    victim.kill()
    load.killed_at = time.monotonic()

    # The victim's running tasks end FAILED, naming the lost replica, within the lease.
    for started in running:
        ended = wait_until(
            partial(_final_task, cluster, started["id"]),
            timeout=TAKEN_OVER - (time.monotonic() - load.killed_at),
            what=f"task {started['id']} taken over within {TAKEN_OVER} s of the kill",
        )
        assert ended["status"]["state"] == "TASK_STATE_FAILED"
        assert "stopped before it finished" in ended["status"]["message"]["parts"][0]["text"]
    for caller in callers:
        caller.join(timeout=LOAD_LIMIT + 30)
    told = f"replica-2 (pid {victim.pid}) exited"
    wait_until(
        lambda: told in (cluster.logs / "cluster.out").read_text(),
        timeout=5,
        what="the cluster saying so",
    )

    # Every task a caller was answered COMPLETED is there, as it was answered, on any replica.
    assert len(load.completed) + len(load.refused) == CALLERS * CALLS
    assert load.after_kill > 0, "the cluster kept answering after the kill"
    for task_id, text in load.completed.items():
        task = get_task(cluster, task_id)
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert answer_text(task) == text
