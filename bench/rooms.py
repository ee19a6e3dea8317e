"""`python -m bench rooms`: room posts at scale, on SQLite and PostgreSQL, side by side in one run.

Every server is `ranch serve` as a deployment starts it (its log and access log to a file, rate
limits off), bound to 127.0.0.1, with one echo agent and 16 rooms that wake no agent (no agent
takes part, none is the default): a post writes the message and its event, and nothing else.
Databases: a SQLite file; a fresh PostgreSQL database at 127.0.0.1:5432 ("direct"); and another
fresh one reached through bench/latency.py, a proxy adding 1 ms each way ("1 ms away").

1. **One process.** Per database, one server pinned to one core (the load on the others) takes
   turns, round after round, between SendMessage to the echo agent (c=32) and five kinds of
   posts: one writer into 1 room and one writer into each of 16 rooms (rooms written at once
   should not wait for each other: 16 rooms vs 1 is the parallelism alone), then 32 writers into
   1 room and into 16 rooms (a room's queued posts also share one commit), all with the admin
   key, and 32 people into 16 rooms, each with a key of their own and taking part in their room
   (a batch then holds many people's posts, as on a hub). Server CPU per request (from /proc)
   compares a plain post with a SendMessage on the same server.
2. **Replicas.** Two `ranch serve` processes on one PostgreSQL database 1 ms away, sharing Redis
   at 127.0.0.1:6379 as replicas do, each held to a quarter of a core: posts into 16 rooms at
   c=128 (more than one replica takes), all to replica A (a cluster of one), then half to each
   with each room on one (as `make cluster`'s balancer routes a room's calls), then half to each
   with every room written on both (as a round-robin balancer spreads them), taking turns.

The load is a pool of raw keep-alive HTTP/1.1 connections in this process (asyncio), each
posting one request at a time; it stops after `--seconds` or a request budget, whichever first.
Each row is the median of `--rounds` samples. Everything binds and connects to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.common import (
    HOST,
    SERVER_CPUS,
    cpu_budget,
    cpu_seconds,
    free_port,
    host_load,
    median,
    percentile,
    server_process,
    table,
    wake_cost_us,
)
from bench.load import read_response
from bench.wire import MESSAGE, rpc

ADMIN_KEY = "rk_bench_rooms_admin"
REDIS_PORT = 6379
POSTGRES_PORT = 5432
CONFIG = """
agents:
  - {id: echo, kind: echo}
"""
ROOMS = 16
REPLICA_CPUS = 0.25
"""Each replica's CPU in the replicas comparison, in cores: a replica per machine of a quarter of a
core, so that two of them, the database, the latency proxy and the load fit on a 2-core host.
Unlimited, two replicas share the cores the rest needs and the ratio measures the host; at half a
core each, the load and the proxy driving two saturated replicas already take what is left."""
REPLICA_CONCURRENCY = 128
"""Connections in the replicas comparison: more posts at once than one replica takes (it is at its
CPU budget), so that a second one has work to take over. With fewer, the load is bound by the
round trips to the database, whatever the number of replicas: 32 connections wait on about 70 ms
each, one replica or two."""
TEXT = {"text": "a plain post: it mentions no one and the room has no agent"}
CAP = 200_000
"""Most requests one sample sends, whatever its seconds."""
ANSWER_WITHIN = 30.0
"""Seconds one request may take before its connection gives up (an error)."""
KINDS = ("sqlite", "postgres", "postgres-1ms")
LABELS = {
    "sqlite": "SQLite",
    "postgres": "PostgreSQL direct",
    "postgres-1ms": "PostgreSQL 1 ms away",
}


@dataclass(frozen=True)
class Operation:
    """One row of a server's table: what is sent, into how many rooms, by how many connections."""

    key: str
    label: str
    rooms: int
    """0: SendMessage to the echo agent; else posts, connection i into room i mod `rooms`."""
    writers: int
    people: bool = False
    """Each connection posts as a person of its own (its own key, taking part in its room), as a
    hub's users do; else every connection presents the admin key."""


def operations(concurrency: int) -> list[Operation]:
    """SendMessage; one writer per room in 1 room and in 16 (parallelism alone: a lone writer has
    nothing to share its room's commit with); and `concurrency` writers into 1 room and into 16."""
    return [
        Operation("send", "SendMessage to echo", 0, concurrency),
        Operation("one-solo", "post, 1 room, 1 writer", 1, 1),
        Operation("many-solo", f"post, {ROOMS} rooms, 1 writer each", ROOMS, ROOMS),
        Operation("one-busy", f"post, 1 room, {concurrency} writers", 1, concurrency),
        Operation("many-busy", f"post, {ROOMS} rooms, {concurrency} writers", ROOMS, concurrency),
        Operation("people", f"post, {ROOMS} rooms, {concurrency} people", ROOMS, concurrency, people=True),
    ]


@dataclass
class Target:
    """Where one connection of the pool posts: a server's port and a prepared request."""

    port: int
    request: bytes


@dataclass
class Sample:
    requests: int
    errors: int
    rps: float
    p50_ms: float
    p99_ms: float
    cpu_us: float
    """Server CPU (every server's, summed) per request."""
    proxy_load: float | None = None
    """The latency proxy's CPU over the sample, in cores (a proxy near 1.0 is the limit)."""


def http_request(path: str, body: object, headers: dict[str, str]) -> bytes:
    data = json.dumps(body).encode()
    extra = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    head = f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n{extra}"
    return (head + f"Content-Length: {len(data)}\r\n\r\n").encode() + data


def send_message(port: int) -> Target:
    return Target(port, http_request("/a2a/agents/echo", rpc("SendMessage", MESSAGE), {"A2A-Version": "1.0"}))


def post(port: int, room: str, key: str = ADMIN_KEY) -> Target:
    return Target(port, http_request(f"/api/v1/rooms/{room}/messages", TEXT, {"X-API-Key": key}))


async def _worker(
    target: Target, deadline: float, budget: list[int], times: list[float], errors: list[str]
) -> None:
    try:
        reader, writer = await asyncio.open_connection(HOST, target.port)
    except OSError as exc:
        errors.append(f"connect: {exc!r}")
        return
    try:
        while time.perf_counter() < deadline and budget[0] > 0:
            budget[0] -= 1
            started = time.perf_counter()
            writer.write(target.request)
            status, body = await asyncio.wait_for(read_response(reader), timeout=ANSWER_WITHIN)
            times.append(time.perf_counter() - started)
            if not 200 <= status < 300 or b'"error"' in body:
                errors.append(f"HTTP {status}: {body[:200]!r}")
    except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
        errors.append(f"connection: {exc!r}")
    finally:
        writer.close()


def sample(
    targets: Sequence[Target], concurrency: int, seconds: float, pids: Sequence[int], proxy: int | None = None
) -> Sample:
    """`concurrency` connections, connection i sending `targets[i % len(targets)]` one at a time; `pids`
    are the servers whose CPU is counted, `proxy` the latency proxy's process."""
    times: list[float] = []
    errors: list[str] = []

    async def run() -> float:
        budget = [CAP]
        started = time.perf_counter()
        deadline = started + seconds
        pool = [targets[n % len(targets)] for n in range(concurrency)]
        await asyncio.gather(*(_worker(target, deadline, budget, times, errors) for target in pool))
        return time.perf_counter() - started

    cpu = sum(cpu_seconds(pid) for pid in pids)
    proxy_cpu = cpu_seconds(proxy) if proxy is not None else 0.0
    elapsed = asyncio.run(run())
    cpu = sum(cpu_seconds(pid) for pid in pids) - cpu
    proxy_load = (cpu_seconds(proxy) - proxy_cpu) / elapsed if proxy is not None else None
    if errors:
        print(f"  {len(errors)} errors, first: {errors[0]}", file=sys.stderr)
    return Sample(
        requests=len(times),
        errors=len(errors),
        rps=len(times) / elapsed,
        p50_ms=percentile(times, 0.5) * 1000,
        p99_ms=percentile(times, 0.99) * 1000,
        cpu_us=cpu * 1e6 / max(len(times), 1),
        proxy_load=proxy_load,
    )


def middle(samples: Sequence[Sample]) -> Sample:
    """The median of each column over a row's samples."""
    return Sample(
        requests=sum(s.requests for s in samples),
        errors=sum(s.errors for s in samples),
        rps=median([s.rps for s in samples]),
        p50_ms=median([s.p50_ms for s in samples]),
        p99_ms=median([s.p99_ms for s in samples]),
        cpu_us=median([s.cpu_us for s in samples]),
        proxy_load=max((s.proxy_load for s in samples if s.proxy_load is not None), default=None),
    )


# -- servers and databases ------------------------------------------------------------------------------


def reachable(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex((HOST, port)) == 0


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh PostgreSQL database at 127.0.0.1:5432 (its name), dropped afterwards."""
    from bench.cluster import database

    with database() as url:
        yield url.rsplit("/", 1)[1]


def postgres_url(name: str, port: int = POSTGRES_PORT) -> str:
    return f"postgresql+asyncpg://postgres@{HOST}:{port}/{name}"


@dataclass
class Database:
    url: str
    proxy_pid: int | None = None
    """The latency proxy's process, when the database is reached through one."""


@contextlib.contextmanager
def database(kind: str, folder: Path) -> Iterator[Database]:
    """A fresh database of `kind` (the proxy runs while the block does)."""
    from bench.latency import proxy

    if kind == "sqlite":
        yield Database(f"sqlite+aiosqlite:///{folder / f'rooms-{uuid.uuid4().hex[:8]}.db'}")
        return
    with postgres_database() as name:
        if kind == "postgres":
            yield Database(postgres_url(name))
            return
        with proxy(POSTGRES_PORT, 1.0) as near:
            yield Database(postgres_url(name, near.port), near.pid)


@dataclass
class Served:
    url: str
    port: int
    pid: int


@contextlib.contextmanager
def serve(config: Path, db: str, folder: Path, *flags: str, cpus: set[int] | None = None) -> Iterator[Served]:
    """`ranch serve` on `db` as deployed (access log to a file), rate limits off."""
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--db", db]
    command += ["--caller-rate", "off", "--agent-rate", "off", *flags]
    url = f"http://{HOST}:{port}"
    env = {"RANCH_ADMIN_KEY": ADMIN_KEY}
    log = folder / f"{port}.log"
    with server_process(
        command, f"{url}/healthz", timeout=90, quiet=True, env=env, log=log, cpus=cpus
    ) as process:
        yield Served(url, port, process.pid)


def make_rooms(url: str, count: int) -> list[str]:
    """`count` rooms that wake no agent (no agent takes part, none is the default)."""
    rooms = []
    with httpx.Client(base_url=f"{url}/api/v1", headers={"X-API-Key": ADMIN_KEY}, timeout=30) as client:
        for n in range(count):
            response = client.post("/rooms", json={"title": f"bench {n}"})
            response.raise_for_status()
            rooms.append(str(response.json()["id"]))
    return rooms


def make_people(url: str, rooms: Sequence[str], count: int) -> list[tuple[str, str]]:
    """`count` people, person i taking part in room i mod the rooms: each one's room and key."""
    people = []
    with httpx.Client(base_url=f"{url}/api/v1", headers={"X-API-Key": ADMIN_KEY}, timeout=30) as client:
        for n in range(count):
            made = client.post("/users", json={"name": f"bench person {n}"})
            made.raise_for_status()
            room = rooms[n % len(rooms)]
            joined = client.post(
                f"/rooms/{room}/participants", json={"kind": "user", "id": made.json()["user"]["id"]}
            )
            joined.raise_for_status()
            people.append((room, str(made.json()["api_key"])))
    return people


def rooms_known(url: str, rooms: Sequence[str], wait: float = 30.0) -> None:
    """Wait until the server at `url` reads every room (another replica made them)."""
    deadline = time.monotonic() + wait
    with httpx.Client(base_url=f"{url}/api/v1", headers={"X-API-Key": ADMIN_KEY}, timeout=10) as client:
        for room in rooms:
            while client.get(f"/rooms/{room}").status_code != 200:
                if time.monotonic() > deadline:
                    raise SystemExit(f"{url} never saw room {room}")
                time.sleep(0.05)


# -- the measurements -----------------------------------------------------------------------------------


@dataclass
class Args:
    seconds: float
    rounds: int
    concurrency: int
    replica_cpus: float | None = REPLICA_CPUS
    """Each replica's CPU budget in cores (None: not limited)."""
    replica_concurrency: int = REPLICA_CONCURRENCY


def one_process(kind: str, config: Path, folder: Path, args: Args) -> dict[str, Sample]:
    """Every operation's row, taking turns on one server of `kind`."""
    with database(kind, folder) as db, serve(config, db.url, folder, cpus=SERVER_CPUS) as server:
        rooms = make_rooms(server.url, ROOMS)
        people = make_people(server.url, rooms, args.concurrency)

        def targets_of(op: Operation) -> list[Target]:
            if not op.rooms:
                return [send_message(server.port)]
            if op.people:
                return [post(server.port, room, key) for room, key in people]
            return [post(server.port, room) for room in rooms[: op.rooms]]

        plan = {op.key: (op, targets_of(op)) for op in operations(args.concurrency)}
        for op, targets in plan.values():  # warm up
            sample(targets, op.writers, min(1.0, args.seconds), [server.pid])
        taken: dict[str, list[Sample]] = {key: [] for key in plan}
        for _round in range(args.rounds):
            for key, (op, targets) in plan.items():
                taken[key].append(sample(targets, op.writers, args.seconds, [server.pid], db.proxy_pid))
    return {key: middle(samples) for key, samples in taken.items()}


LAYOUTS = {
    "one": "1: A",
    "split": "2: A and B, each room on one",
    "shared": "2: A and B, each room written on both",
}


def replicas(config: Path, folder: Path, args: Args) -> tuple[dict[str, Sample], str]:
    """Posts into 16 rooms on one replica, then over two, on one database 1 ms away (`LAYOUTS`), each
    replica held to `args.replica_cpus` cores; the rows, and the budget as applied."""
    prefix = ("--redis-url", f"redis://{HOST}:{REDIS_PORT}/0", "--redis-prefix", f"rb-{uuid.uuid4().hex[:8]}")
    with (
        database("postgres-1ms", folder) as db,
        serve(config, db.url, folder, *prefix) as a,
        serve(config, db.url, folder, *prefix) as b,
        cpu_budget(a.pid, args.replica_cpus) as budget,
        cpu_budget(b.pid, args.replica_cpus),
    ):
        rooms = make_rooms(a.url, ROOMS)
        rooms_known(b.url, rooms)
        half = ROOMS // 2
        # connection i takes target i mod the list: room i mod 16 on A; then either the next 16
        # connections on B (every room from both), or the second half of the rooms on B alone
        layouts = {
            "one": [post(a.port, room) for room in rooms],
            "split": [post(a.port if n < half else b.port, room) for n, room in enumerate(rooms)],
            "shared": [post(a.port, room) for room in rooms] + [post(b.port, room) for room in rooms],
        }
        pids = [a.pid, b.pid]
        for targets in layouts.values():
            sample(targets, args.replica_concurrency, min(1.0, args.seconds), pids)
        taken: dict[str, list[Sample]] = {key: [] for key in layouts}
        for _round in range(args.rounds):
            for key, targets in layouts.items():
                taken[key].append(sample(targets, args.replica_concurrency, args.seconds, pids, db.proxy_pid))
    return {key: middle(samples) for key, samples in taken.items()}, budget


# -- the tables -----------------------------------------------------------------------------------------


def proxy_share(row: Sample) -> str:
    return "-" if row.proxy_load is None else f"{row.proxy_load * 100:.0f} %"


def process_rows(results: dict[str, dict[str, Sample]], concurrency: int) -> list[list[object]]:
    rows: list[list[object]] = []
    for kind, measured in results.items():
        send, solo = measured["send"], measured["one-solo"]
        for op in operations(concurrency):
            row = measured[op.key]
            posts = op.rooms > 0
            rows.append(
                [
                    LABELS[kind],
                    op.label,
                    op.writers,
                    f"{row.rps:,.0f}",
                    f"{row.p50_ms:.2f}",
                    f"{row.p99_ms:.2f}",
                    f"{row.cpu_us:,.0f}",
                    row.errors,
                    f"{row.cpu_us / send.cpu_us:.2f}x" if posts and send.cpu_us else "-",
                    f"{row.rps / solo.rps:.2f}x" if posts and solo.rps else "-",
                    proxy_share(row),
                ]
            )
    return rows


def replica_rows(results: dict[str, Sample], concurrency: int) -> list[list[object]]:
    base = results["one"].rps
    return [
        [
            LAYOUTS[key],
            concurrency,
            f"{row.rps:,.0f}",
            f"{row.p50_ms:.2f}",
            f"{row.p99_ms:.2f}",
            f"{row.cpu_us:,.0f}",
            row.errors,
            f"{row.rps / base:.2f}x" if base else "-",
            proxy_share(row),
        ]
        for key, row in results.items()
    ]


def target_rows(
    results: dict[str, dict[str, Sample]], pair: dict[str, Sample] | None, concurrency: int
) -> list[list[object]]:
    rows: list[list[object]] = []

    def add(what: str, bound: str, value: float, text: str, met: bool) -> None:
        rows.append([what, bound, text.format(value), "met" if met else "not met"])

    for kind, measured in results.items():
        send, busy = measured["send"], measured["many-busy"]
        solo, spread = measured["one-solo"], measured["many-solo"]
        if send.cpu_us:
            ratio = busy.cpu_us / send.cpu_us
            detail = f"{{:.2f}}x ({busy.cpu_us:,.0f} vs {send.cpu_us:,.0f} µs)"
            what = f"plain post's server CPU ({ROOMS} rooms, c={concurrency}) vs SendMessage's"
            add(f"{what}, {LABELS[kind]}", "<= 5x", ratio, detail, ratio <= 5)
        if kind == "postgres-1ms" and solo.rps:
            ratio = spread.rps / solo.rps
            detail = f"{{:.2f}}x ({spread.rps:,.0f} vs {solo.rps:,.0f} posts/s)"
            what = f"posts/s, {ROOMS} rooms vs 1 (1 writer a room)"
            add(f"{what}, {LABELS[kind]}", ">= 4x", ratio, detail, ratio >= 4)
        if kind in ("sqlite", "postgres"):
            what = f"posts/s on one process ({ROOMS} rooms, c={concurrency})"
            add(f"{what}, {LABELS[kind]}", ">= 1,000", busy.rps, "{:,.0f}", busy.rps >= 1000)
    if pair is not None and pair["one"].rps:
        for key, how in (
            ("split", "each room on one, as the balancer routes it"),
            ("shared", "each room on both"),
        ):
            ratio = pair[key].rps / pair["one"].rps
            detail = f"{{:.2f}}x ({pair[key].rps:,.0f} vs {pair['one'].rps:,.0f} posts/s)"
            what = f"posts/s, 2 replicas vs 1 ({how}), PostgreSQL 1 ms away"
            add(what, ">= 1.6x", ratio, detail, ratio >= 1.6)
    return rows


def render(
    results: dict[str, dict[str, Sample]],
    pair: dict[str, Sample] | None,
    args: Args,
    trip: str,
    budget: str = "not limited",
) -> str:
    header = [
        "database",
        "operation",
        "c",
        "req/s",
        "p50 ms",
        "p99 ms",
        "server CPU µs/req",
        "errors",
        "CPU vs SendMessage",
        "req/s vs 1 room, 1 writer",
        "proxy CPU",
    ]
    note = (
        "`ranch serve` as deployed (access log to a file, rate limits off), pinned to one core; the load "
        "(c keep-alive connections, each sending one request at a time) on the others. A post goes to a "
        "room no agent takes part in; connection i posts to room i mod the rooms. One writer a room "
        "measures rooms written in parallel; many writers a room also let a room's queued posts share "
        f"one commit. Median of {args.rounds} samples of {args.seconds:g} s, the rows taking turns on one "
        f"server per database.{trip}"
    )
    text = table("Room posts, one process", header, process_rows(results, args.concurrency), note)
    if pair is not None:
        header = [
            "replicas",
            "c",
            "posts/s",
            "p50 ms",
            "p99 ms",
            "server CPU µs/post",
            "errors",
            "vs 1",
            "proxy CPU",
        ]
        note = (
            f"Two `ranch serve` replicas (Redis at 127.0.0.1:{REDIS_PORT}) on one PostgreSQL database 1 ms "
            f"away, not pinned; CPU: {budget}, as if each had a machine of that size (the host's cores are "
            f"shared with the database, the proxy and the load); {args.replica_concurrency} connections, "
            f"connection i posting to room i mod {ROOMS}. 1: all to replica A. 2, each room on one: rooms "
            f"0-{ROOMS // 2 - 1} on A, the rest on B, as `make cluster`'s balancer routes a room's calls "
            f"(docs/deploy.md). 2, each room written on both: connections 0-{ROOMS - 1} to A, the next "
            f"{ROOMS} to B, and so on, as a round-robin balancer spreads them. Server CPU is both "
            f"replicas'. Median of {args.rounds} samples of {args.seconds:g} s, taking turns."
        )
        rows = replica_rows(pair, args.replica_concurrency)
        text += "\n" + table("Room posts, replicas", header, rows, note)
    targets = target_rows(results, pair, args.concurrency)
    if targets:
        text += "\n" + table("Room targets", ["target", "bound", "measured", "met"], targets)
    return text


def round_trips() -> str:
    """A sentence on what the latency proxy really adds to a round trip."""
    from bench.latency import proxy, round_trip_ms

    dsn = f"postgresql://postgres@{HOST}:{POSTGRES_PORT}/postgres"
    direct = round_trip_ms(dsn)
    with proxy(POSTGRES_PORT, 1.0) as near:
        away = round_trip_ms(dsn.replace(f":{POSTGRES_PORT}/", f":{near.port}/"))
    return f" One `SELECT 1` round trip: {direct:.2f} ms direct, {away:.2f} ms through the proxy (median)."


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="bench.rooms", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per sample")
    parser.add_argument("--rounds", type=int, default=3, help="samples per row, taking turns")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument(
        "--replica-concurrency",
        type=int,
        default=REPLICA_CONCURRENCY,
        help="connections in the replicas comparison (enough to keep one replica busy)",
    )
    parser.add_argument("--databases", nargs="+", choices=KINDS, default=list(KINDS))
    parser.add_argument("--no-replicas", action="store_true", help="skip the two-replica comparison")
    parser.add_argument(
        "--replica-cpus",
        type=float,
        default=REPLICA_CPUS,
        help="each replica's CPU budget in cores, a cgroup's quota (needs root; 0: not limited)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round of 0.3 s a row")
    parsed = parser.parse_args(argv or [])
    budget = parsed.replica_cpus or None
    args = Args(parsed.seconds, parsed.rounds, parsed.concurrency, budget, parsed.replica_concurrency)
    if parsed.quick:
        args = Args(0.3, 1, 32, budget, parsed.replica_concurrency)
    kinds = list(parsed.databases)
    with_replicas = not parsed.no_replicas
    postgres = [kind for kind in kinds if kind != "sqlite"] or ([None] if with_replicas else [])
    if postgres and not reachable(POSTGRES_PORT):
        raise SystemExit(f"PostgreSQL is not listening on {HOST}:{POSTGRES_PORT} (use --databases sqlite)")
    if with_replicas and not reachable(REDIS_PORT):
        raise SystemExit(f"Redis is not listening on {HOST}:{REDIS_PORT} (use --no-replicas)")
    trip = round_trips() if "postgres-1ms" in kinds or with_replicas else ""
    idle, turn = wake_cost_us()
    trip += (
        f" On this host an event-loop wake after 1 ms idle costs {idle:.0f} µs of CPU, a busy loop turn"
        f" {turn:.1f} µs (a server that waits on its database pays the first at each answer)."
    )
    load = host_load()
    with tempfile.TemporaryDirectory(prefix="ranch-bench-rooms-") as tmp:
        folder = Path(tmp)
        config = folder / "rooms.yaml"
        config.write_text(CONFIG)
        results = {kind: one_process(kind, config, folder, args) for kind in kinds}
        pair, budget = replicas(config, folder, args) if with_replicas else (None, "not limited")
    trip += f" Host load (1-minute average): {load:.1f} at the start, {host_load():.1f} at the end."
    text = render(results, pair, args, trip, budget)
    print(text)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
