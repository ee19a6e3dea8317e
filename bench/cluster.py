"""`python -m bench cluster`: replicas on one PostgreSQL and one Redis, measured side by side.

Every server is `ranch serve` as a deployment starts it (rate limits off, log to a file), on a
fresh PostgreSQL database at 127.0.0.1:5432, with Redis at 127.0.0.1:6379 for the replicas.

1. **Room event latency.** A WebSocket watcher subscribed to one room; a person posts N messages
   to the room, one at a time, on replica A. The latency of one event is the time from just
   before the POST is sent to the moment a watcher reads the `message.created` frame. Three
   watchers see the same events in one run: on a single process without Redis (the embedded
   default, its own posts), on A (the writer) and on B (another replica) of a two-replica pair.
2. **Failover.** On the pair, with the default lease: a room's agent is busy with a message
   queued on A and a second message waits behind it; A is killed (SIGKILL). The time from the
   kill to the moment B has answered the queued message.
3. **Throughput with `--workers`.** SendMessage to an echo agent at c=32 for `ranch serve
   --workers 2` (with Redis) against one worker, on this machine, the two taking turns.

Everything binds and connects to 127.0.0.1; every loop is bounded in count and seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from websockets.sync.client import connect

from bench.common import free_port, median, percentile, server_process, table
from bench.wire import MESSAGE, load, rpc

ADMIN_KEY = "rk_bench_admin"
REDIS = "redis://127.0.0.1:6379/0"
POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"
CONFIG = """
agents:
  - {id: echo, kind: echo}
  - id: worker
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 60, sleep_on: "take your time", reply: "done: {text}"}
"""
WAIT = 10.0
"""Seconds one event may take to reach every watcher before the benchmark gives up."""
FAILOVER_LIMIT = 60.0


@contextlib.contextmanager
def database() -> Iterator[str]:
    """A fresh PostgreSQL database, dropped afterwards."""
    import asyncpg

    name = f"ranch_bench_{uuid.uuid4().hex[:10]}"

    async def run(statement: str) -> None:
        connection = await asyncpg.connect(POSTGRES, timeout=5)
        try:
            await connection.execute(statement)
        finally:
            await connection.close()

    asyncio.run(run(f'CREATE DATABASE "{name}"'))
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        asyncio.run(run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextlib.contextmanager
def serve(config: Path, db: str, folder: Path, *flags: str) -> Iterator[tuple[str, int]]:
    """`ranch serve` on `db` with `flags`, its log in `folder`; its URL and pid."""
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--db", db]
    command += ["--caller-rate", "off", "--agent-rate", "off", *flags]
    url = f"http://127.0.0.1:{port}"
    env = {"RANCH_ADMIN_KEY": ADMIN_KEY}
    log = folder / f"{port}.log"
    with server_process(command, f"{url}/healthz", timeout=60, quiet=True, env=env, log=log) as process:
        yield url, process.pid


def shared(prefix: str) -> tuple[str, ...]:
    return ("--redis-url", REDIS, "--redis-prefix", prefix)


@dataclass
class Watcher:
    """A WebSocket subscribed to a room, noting when each message's `message.created` arrived."""

    url: str
    room: str
    seen: dict[str, float] = field(default_factory=dict)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        ws_url = self.url.replace("http://", "ws://", 1) + f"/api/v1/ws?token={ADMIN_KEY}"
        self.connection = connect(ws_url, open_timeout=10, max_size=None)
        self.connection.send(json.dumps({"type": "subscribe", "rooms": {self.room: 0}}))
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        with contextlib.suppress(Exception):  # the connection closed: the benchmark is over
            for raw in self.connection:
                now = time.perf_counter()
                frame = json.loads(raw)
                if frame.get("type") == "message.created":
                    with self.arrived:
                        self.seen[frame["data"]["text"]] = now
                        self.arrived.notify_all()

    def wait_for(self, text: str) -> float:
        with self.arrived:
            if not self.arrived.wait_for(lambda: text in self.seen, timeout=WAIT):
                raise SystemExit(f"{self.url}: no event for {text!r} within {WAIT} s")
            return self.seen[text]

    def close(self) -> None:
        self.connection.close()


def admin(url: str) -> httpx.Client:
    return httpx.Client(base_url=f"{url}/api/v1", headers={"X-API-Key": ADMIN_KEY}, timeout=30)


def make_room(url: str, *agents: str) -> str:
    with admin(url) as client:
        participants = [{"kind": "agent", "id": agent} for agent in agents]
        response = client.post("/rooms", json={"title": "bench", "participants": participants})
        response.raise_for_status()
        return str(response.json()["id"])


def latencies(writer: str, room: str, watchers: list[Watcher], count: int) -> list[list[float]]:
    """Per watcher, the ms from each POST on `writer` to its event, `count` posts one at a time."""
    result: list[list[float]] = [[] for _ in watchers]
    with admin(writer) as client:
        for n in range(count):
            text = f"event {n} {uuid.uuid4().hex[:6]}"
            sent = time.perf_counter()
            client.post(f"/rooms/{room}/messages", json={"text": text}).raise_for_status()
            for row, watcher in zip(result, watchers, strict=True):
                row.append((watcher.wait_for(text) - sent) * 1000)
    return result


def room_known(url: str, room: str) -> None:
    deadline = time.monotonic() + WAIT
    with admin(url) as client:
        while client.get(f"/rooms/{room}").status_code != 200:
            if time.monotonic() > deadline:
                raise SystemExit(f"{url} never saw room {room}")
            time.sleep(0.05)


def measure_events(config: Path, folder: Path, count: int) -> list[list[object]]:
    """The latency table's rows."""
    rows: list[list[object]] = []
    prefix = f"ranch-bench-{uuid.uuid4().hex[:8]}"
    with database() as single_db, database() as pair_db:
        with (
            serve(config, single_db, folder) as (alone_url, _alone_pid),
            serve(config, pair_db, folder, *shared(prefix)) as (a_url, _a_pid),
            serve(config, pair_db, folder, *shared(prefix)) as (b_url, _b_pid),
        ):
            single_room = make_room(alone_url, "echo")
            pair_room = make_room(a_url, "echo")
            room_known(b_url, pair_room)
            on_single = Watcher(alone_url, single_room)
            on_a, on_b = Watcher(a_url, pair_room), Watcher(b_url, pair_room)
            latencies(alone_url, single_room, [on_single], 20)  # warm up
            latencies(a_url, pair_room, [on_a, on_b], 20)
            (single,) = latencies(alone_url, single_room, [on_single], count)
            same, other = latencies(a_url, pair_room, [on_a, on_b], count)
            for watcher in (on_single, on_a, on_b):
                watcher.close()
            base = percentile(single, 0.99)
            for name, values in (
                ("one process, no Redis (its own post)", single),
                ("replica A, the writer", same),
                ("replica B, another replica", other),
            ):
                p99 = percentile(values, 0.99)
                rows.append([name, len(values), f"{median(values):.2f}", f"{p99:.2f}", f"{p99 / base:.2f}x"])
    return rows


def measure_failover(config: Path, folder: Path, samples: int) -> list[float]:
    """Failover times (s), each on a fresh pair of replicas with the default lease."""
    times = []
    for _sample in range(samples):
        prefix = f"ranch-bench-{uuid.uuid4().hex[:8]}"
        with (
            database() as db,
            serve(config, db, folder, *shared(prefix)) as (a_url, a_pid),
            serve(config, db, folder, *shared(prefix)) as (b_url, _b_pid),
        ):
            room = make_room(a_url, "worker")
            room_known(b_url, room)
            times.append(time_failover(a_pid, a_url, b_url, room))
    return times


def time_failover(victim_pid: int, victim_url: str, survivor_url: str, room: str) -> float:
    """Seconds from SIGKILL of the replica holding a queued message to its answer by the other."""
    with admin(victim_url) as client:
        client.post(f"/rooms/{room}/messages", json={"text": "@worker take your time"}).raise_for_status()
        deadline = time.monotonic() + WAIT
        while not _working(client, room):
            if time.monotonic() > deadline:
                raise SystemExit("the worker never started on the first message")
            time.sleep(0.05)
        queued = client.post(f"/rooms/{room}/messages", json={"text": "@worker the queued one"})
        queued.raise_for_status()
    os.kill(victim_pid, signal.SIGKILL)  # not reaped until the benchmark ends: a zombie, as it may be
    killed = time.monotonic()
    after = {"since": queued.json()["cursor"], "limit": 200}
    with admin(survivor_url) as client:
        while time.monotonic() - killed < FAILOVER_LIMIT:
            texts = [m["text"] for m in client.get(f"/rooms/{room}/messages", params=after).json()["items"]]
            if "done: the queued one" in texts:
                return time.monotonic() - killed
            time.sleep(0.05)
    raise SystemExit(f"the queued message was not answered within {FAILOVER_LIMIT} s of the kill")


def _working(client: httpx.Client, room: str) -> bool:
    rows = client.get(f"/rooms/{room}/executions").json()["items"]
    return any(row["agent_id"] == "worker" and row["status"] == "working" for row in rows)


def measure_workers(config: Path, folder: Path, seconds: float, rounds: int) -> list[list[object]]:
    """SendMessage at c=32: `--workers 2` (Redis) against one worker, taking turns."""
    results: dict[int, list[float]] = {1: [], 2: []}
    prefix = f"ranch-bench-{uuid.uuid4().hex[:8]}"
    two_workers = ("--workers", "2", *shared(prefix))
    with (
        serve(config, f"sqlite+aiosqlite:///{folder / 'one.db'}", folder) as (one_url, _one_pid),
        serve(config, f"sqlite+aiosqlite:///{folder / 'two.db'}", folder, *two_workers) as (
            two_url,
            _two_pid,
        ),
    ):
        for url in (one_url, two_url):  # warm up
            load(f"{url}/a2a/agents/echo", rpc("SendMessage", MESSAGE), 32, 1.0, {})
        for _round in range(rounds):
            for workers, url in ((1, one_url), (2, two_url)):
                row = load(f"{url}/a2a/agents/echo", rpc("SendMessage", MESSAGE), 32, seconds, {})
                results[workers].append(row["rps"])
    one, two = median(results[1]), median(results[2])
    return [
        ["`ranch serve` (one worker)", f"{one:,.0f}", "1.00x"],
        ["`ranch serve --workers 2 --redis-url …`", f"{two:,.0f}", f"{two / one:.2f}x"],
    ]


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="bench.cluster")
    parser.add_argument("--events", type=int, default=300, help="posts measured per watcher set")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per throughput sample")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--failovers", type=int, default=3, help="kill -9 samples, each on a fresh pair")
    args = parser.parse_args(argv or [])
    with tempfile.TemporaryDirectory(prefix="ranch-bench-cluster-") as tmp:
        folder = Path(tmp)
        config = folder / "cluster.yaml"
        config.write_text(CONFIG)
        event_rows = measure_events(config, folder, args.events)
        failovers = measure_failover(config, folder, args.failovers)
        worker_rows = measure_workers(config, folder, args.seconds, args.rounds)
    section = table(
        "Room events across replicas",
        ["watcher", "events", "p50 ms", "p99 ms", "p99 vs one process"],
        event_rows,
        f"From just before a person's POST to the watcher reading its `message.created` frame; "
        f"{args.events} posts, one at a time, PostgreSQL for all three (targets: replica B's p99 ≤ 2x "
        "and ≤ 20 ms on an idle machine).",
    )
    section += "\n" + table(
        "Failover",
        ["measured", "samples", "min s", "median s", "max s", "target"],
        [
            [
                "kill -9 of the replica holding a queued room message → its answer by the other",
                len(failovers),
                f"{min(failovers):.1f}",
                f"{median(failovers):.1f}",
                f"{max(failovers):.1f}",
                "≤ 10",
            ]
        ],
        "Two replicas on one machine, default lease (10 s), a fresh pair per sample: the survivor sees the "
        "dead process gone (its pid) at its next take-over round, every half lease, so a sample falls "
        "anywhere from 0 to 5 s. Replicas on other hosts wait for the lease to lapse: 10 to 15 s.",
    )
    section += "\n" + table(
        "SendMessage with `--workers`",
        ["server", "req/s at c=32 (median)", "vs one worker"],
        worker_rows,
        f"Echo agent on SQLite, load from a separate process on the same 2 cores, {args.rounds} samples of "
        f"{args.seconds:g} s each, the two servers taking turns.",
    )
    print(section)
    return section


if __name__ == "__main__":
    main(sys.argv[1:])
