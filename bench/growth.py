"""`python -m bench growth`: does a request cost the same on a full store as on an empty one?

`ranch serve` (as deployed: rate limits off, log to a file, pinned to one core) serves a team of 3
in-process members (bench/scale.py's: 3 hops a turn). 8 callers send team turns, each in a new
contextId, from an empty store up to `--turns` conversations (100,000). The server is then started
again on that store (a step of its own: what a restart alone changes), stopped, and the store is
filled through the models (SQLAlchemy Core bulk inserts, not HTTP) with `--rows` tasks (1,000,000;
half the caller's) and as many room messages with their `message.created` events (a tenth in the
measured room); the server starts again on it for the last step. At each step it measures:

- **turn**: server CPU per team turn over `--window` turns;
- **GetTask** of one of the caller's tasks (stored through the models: no cache of recent tasks
  holds it); **ListTasks**, first page (50), no filter and with a status filter (COMPLETED); a
  room's **newest message page** (50, REST `?before=`); a WebSocket **replay** from an old cursor
  (the room's first: subscribe, then its first 100 events);
- the server's RSS, and RSS per idle conversation since the empty step.

CPU is the ranch process's (all its threads, /proc/PID/task/*/schedstat, in ns) plus, on PostgreSQL,
that of the database's client backends serving it: a cost that moves into the database still counts.
On PostgreSQL the fill ends with `VACUUM ANALYZE`, as autovacuum would soon after such a load (its
workers are not counted, and they would otherwise be busy during the step).
Each read's figure is the median over `--reads` calls, one at a time. Targets (issue 41): each
within 1.2x of the empty store; at most 16 KiB per idle conversation at the largest step.

Then the write cost of indexes and triggers: the same bulk writes (tasks saved twice through the
store's upsert, events, messages; executemany batches of 100, as the group commit sends them) into
a fresh database at head, at head without migration 0015's retention indexes, and without 0016's
task-count triggers. Everything binds and connects to 127.0.0.1; every loop is bounded in count
and in time (`--budget` seconds of turns per database).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.common import (
    HOST,
    SERVER_CPUS,
    free_port,
    host_load,
    jsonrpc_post,
    median,
    read_body,
    read_head,
    rss_kib,
    server_process,
    table,
)
from bench.scale import CONFIG, PATH, problem, turn_request

ADMIN_KEY = "rk_bench_growth_admin"
OWNER = "desk/"
"""Whose tasks the callers' turns are: the team's, for a caller with no key."""
POSTS = 300
"""Messages posted in the measured room before the first step (its history at the empty step)."""
WARMUP = 200
"""Turns a server runs before its first step (not measured)."""
PROBE = "growth-probe"
"""The id of the task GetTask reads."""
RESTARTED = "server restarted"
NEWEST = 2**63 - 1
"""`before` of a room's newest page."""
REPLAY = 100
"""Events of the replay read before the WebSocket is closed."""
WINDOW_WITHIN = 600.0
"""Seconds a step's window of turns may take (the run's budget does not cut a step short)."""
FILLED_ROOMS = 100
ANSWER_WITHIN = 60.0
INDEX_VARIANTS = ("head", "without 0015's retention indexes", "without 0016's count triggers")
RETENTION_INDEXES = (
    ("ranch_tasks_state_updated", "ranch_tasks"),
    ("events_created", "events"),
    ("messages_created", "messages"),
    ("deliveries_status_message", "deliveries"),
    ("team_conversations_updated", "team_conversations"),
    ("member_sessions_updated", "member_sessions"),
)


def progress(text: str) -> None:
    print(f"[growth {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)


# -- CPU: the server's threads, and its database backends -----------------------------------------------


def _thread_ns(pid: int) -> int:
    total = 0
    with contextlib.suppress(OSError):
        for thread in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(Path(f"/proc/{pid}/task/{thread}/schedstat").read_text().split()[0])
    return total


@dataclass
class Meter:
    """CPU (ns) of the ranch process and, on PostgreSQL, of the backends of its database."""

    pid: int
    database: str | None = None
    backends: list[int] = field(default_factory=list)

    async def refresh(self) -> None:
        if self.database is None:
            return
        import asyncpg

        connection = await asyncpg.connect(f"postgresql://postgres@{HOST}:5432/postgres", timeout=5)
        try:
            rows = await connection.fetch(
                "SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend' "
                "AND pid <> pg_backend_pid()",
                self.database,
            )
        finally:
            await connection.close()
        self.backends = [row["pid"] for row in rows]

    def ns(self) -> int:
        return _thread_ns(self.pid) + sum(_thread_ns(pid) for pid in self.backends)


# -- the load: team turns, each in a new contextId ------------------------------------------------------


@dataclass
class Turns:
    done: int = 0
    errors: int = 0
    examples: list[str] = field(default_factory=list)


async def turns(port: int, first: int, count: int, callers: int, deadline: float, into: Turns) -> None:
    """Turns `first` .. `first + count - 1`, each in its own contextId, by `callers` connections."""
    numbers = iter(range(first, first + count))

    async def caller() -> None:
        reader, writer = await asyncio.open_connection(HOST, port)
        try:
            for number in numbers:
                if time.monotonic() > deadline:
                    return
                writer.write(turn_request(f"g{number}", 0))
                async with asyncio.timeout(ANSWER_WITHIN):
                    status, headers = await read_head(reader)
                    body = await read_body(reader, headers)
                why = problem(status, body)
                into.done += 1
                if why is not None:
                    into.errors += 1
                    if len(into.examples) < 3:
                        into.examples.append(why)
        finally:
            writer.close()

    await asyncio.gather(*(caller() for _ in range(callers)))


# -- the reads ------------------------------------------------------------------------------------------


def rpc(method: str, params: object) -> bytes:
    return jsonrpc_post(PATH, method, params)


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: {HOST}\r\nX-API-Key: {ADMIN_KEY}\r\n\r\n".encode()


@dataclass
class Read:
    cpu_us: float
    p50_ms: float
    errors: int


class Sampled:
    """One read's calls: CPU (µs) and wall time (s) of each, and how many failed."""

    def __init__(self) -> None:
        self.cpu: list[float] = []
        self.wall: list[float] = []
        self.errors = 0

    async def call(self, meter: Meter, one: Callable[[], Awaitable[bool]]) -> None:
        before, started = meter.ns(), time.perf_counter()
        ok = await one()
        self.wall.append(time.perf_counter() - started)
        self.cpu.append((meter.ns() - before) / 1000)
        self.errors += not ok

    def read(self) -> Read:
        return Read(median(self.cpu), median(self.wall) * 1000, self.errors)


class Connection:
    """A keep-alive HTTP/1.1 connection that sends one prepared request at a time, and opens again
    when the server has closed it (as servers may close an idle keep-alive connection)."""

    def __init__(self, port: int, request: bytes) -> None:
        self.port, self.request = port, request
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def one(self) -> bool:
        for attempt in range(2):
            if self.streams is None:
                self.streams = await asyncio.open_connection(HOST, self.port)
            reader, writer = self.streams
            writer.write(self.request)
            try:
                async with asyncio.timeout(ANSWER_WITHIN):
                    status, headers = await read_head(reader)
                    body = await read_body(reader, headers)
            except (asyncio.IncompleteReadError, ConnectionError):
                self.close()
                if attempt:
                    raise
                continue
            return status == 200 and b'"error"' not in body
        return False

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


def replay(port: int, room: str) -> Callable[[], Awaitable[bool]]:
    from websockets.asyncio.client import connect

    async def one() -> bool:
        async with asyncio.timeout(ANSWER_WITHIN):
            async with connect(f"ws://{HOST}:{port}/api/v1/ws?token={ADMIN_KEY}", compression=None) as ws:
                await ws.send(orjson.dumps({"type": "subscribe", "rooms": {room: 1}}).decode())
                answer = orjson.loads(await ws.recv())
                if answer.get("type") != "subscribed":
                    return False
                for _ in range(min(REPLAY, int(answer.get("replayed", 0)))):
                    await ws.recv()
                return True

    return one


REFERENCE = "echo (reference)"
"""A SendMessage to the team's echo member: it stores nothing and reads nothing, so its cost says how
fast the machine was during the step (the cores are shared), not how large the store is."""
READS = ("GetTask", "ListTasks", "ListTasks, status", "room page", "WS replay")
ECHO = {"role": "ROLE_USER", "messageId": "echo", "parts": [{"text": "the reference"}]}


async def reference(port: int, meter: Meter, calls: int) -> Read:
    """The reference alone, `calls` times."""
    connection = Connection(port, jsonrpc_post("/a2a/agents/writer", "SendMessage", {"message": ECHO}))
    sampled = Sampled()
    await meter.refresh()
    try:
        await connection.one()
        for _ in range(calls):
            await sampled.call(meter, connection.one)
    finally:
        connection.close()
    return sampled.read()


async def reads(port: int, meter: Meter, task_id: str, room: str, calls: int) -> dict[str, Read]:
    """Each read `calls` times (the replay a quarter as often), one call at a time, taking turns with
    the other reads and the reference, so every read of a step meets the same machine."""
    requests = {
        REFERENCE: jsonrpc_post("/a2a/agents/writer", "SendMessage", {"message": ECHO}),
        "GetTask": rpc("GetTask", {"id": task_id}),
        "ListTasks": rpc("ListTasks", {"pageSize": 50}),
        "ListTasks, status": rpc("ListTasks", {"pageSize": 50, "status": "TASK_STATE_COMPLETED"}),
        "room page": get(f"/api/v1/rooms/{room}/messages?before={NEWEST}&limit=50"),
    }
    sampled = {name: Sampled() for name in (REFERENCE, *READS)}
    await meter.refresh()
    connections = {name: Connection(port, request) for name, request in requests.items()}
    try:
        for connection in connections.values():
            await connection.one()  # a connection's first request is not measured
        for turn in range(calls):
            for name, connection in connections.items():
                await sampled[name].call(meter, connection.one)
            if turn % 4 == 0:
                await sampled["WS replay"].call(meter, replay(port, room))
    finally:
        for connection in connections.values():
            connection.close()
    return {name: each.read() for name, each in sampled.items()}


# -- filling the store through the models ---------------------------------------------------------------


def task_template() -> Any:
    from a2a.types import Artifact, Message, Part, Role, Task, TaskState, TaskStatus

    reply = Message(role=Role.ROLE_AGENT, message_id="r", parts=[Part(text="Done: worker: a filled turn")])
    task = Task(status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=reply))
    for hop in range(3):
        task.artifacts.append(Artifact(artifact_id=f"hop-{hop}", parts=[Part(text=f"hop {hop} of a turn")]))
    return task


STATES = ["TASK_STATE_COMPLETED"] * 18 + ["TASK_STATE_FAILED", "TASK_STATE_CANCELED"]


def task_rows(start: int, count: int, template: Any, stamp_ns: int) -> list[dict[str, Any]]:
    rows = []
    for number in range(start, start + count):
        task = type(template)()
        task.CopyFrom(template)
        task.id, task.context_id = f"fill-{number}", f"fill-ctx-{number}"
        task.status.timestamp.FromNanoseconds(stamp_ns + number * 1000)
        state = STATES[number % len(STATES)]
        rows.append(
            {
                "id": task.id,
                "owner": OWNER if number % 2 == 0 else f"desk/user-{number % 99}",
                "context_id": task.context_id,
                "state": state,
                "updated_ns": stamp_ns + number * 1000,
                "body": task.SerializeToString(),
                "runner": None,
            }
        )
    return rows


async def fill(url: str, rows: int, room: str) -> None:
    """`rows` tasks, and `rows` messages with their events: a tenth in `room`, the rest spread over
    `FILLED_ROOMS` rooms of its organization. All older than what the turns stored."""
    from sqlalchemy import insert, select, text, update

    from ranch.db.engine import open_engine
    from ranch.db.models import Room, RoomEvent, RoomMessage, ranch_tasks

    engine = open_engine(url)
    chunk = 10_000
    started = time.monotonic()
    try:
        async with engine.begin() as connection:
            org, last = (
                await connection.execute(select(Room.org_id, Room.last_event).where(Room.id == room))
            ).one()
            template: dict[str, Any] = (
                await connection.execute(
                    select(RoomEvent.data)
                    .where(RoomEvent.room_id == room, RoomEvent.type == "message.created")
                    .limit(1)
                )
            ).scalar_one()
        stamp = time.time_ns() - 10 * 86400 * 10**9
        template_task = task_template()
        for start in range(0, rows, chunk):
            async with engine.begin() as connection:
                await connection.execute(
                    insert(ranch_tasks), task_rows(start, min(chunk, rows - start), template_task, stamp)
                )
            if start // chunk % 10 == 0:
                progress(f"  filled {start + chunk:,} tasks ({time.monotonic() - started:.0f} s)")
        rooms = [f"filled-{n}" for n in range(FILLED_ROOMS)]
        async with engine.begin() as connection:
            await connection.execute(
                insert(Room), [{"id": name, "org_id": org, "title": name} for name in rooms]
            )
        cursors = {name: 0 for name in rooms} | {room: last}
        created = time.time() - 10 * 86400
        for start in range(0, rows, chunk):
            messages, events = [], []
            for number in range(start, min(rows, start + chunk)):
                where = room if number % 10 == 0 else rooms[number % FILLED_ROOMS]
                cursors[where] += 1
                message_id = f"fill-m{number}"
                messages.append(
                    {"id": message_id, "room_id": where, "sender_kind": "user", "sender_id": "filler",
                     "text": f"filled message {number}", "created_at": created}
                )  # fmt: skip
                data = {**template, "id": message_id, "text": f"filled message {number}"}
                events.append(
                    {"room_id": where, "cursor": cursors[where], "type": "message.created", "data": data,
                     "created_at": created}
                )  # fmt: skip
            async with engine.begin() as connection:
                await connection.execute(insert(RoomMessage), messages)
                await connection.execute(insert(RoomEvent), events)
            if start // chunk % 10 == 0:
                progress(
                    f"  filled {start + chunk:,} messages and events ({time.monotonic() - started:.0f} s)"
                )
        async with engine.begin() as connection:
            for name, cursor in cursors.items():
                await connection.execute(update(Room).where(Room.id == name).values(last_event=cursor))
        if engine.dialect.name == "postgresql":  # what autovacuum soon does to tables that grew this much
            async with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as connection:
                await connection.execute(text("VACUUM ANALYZE"))
    finally:
        await engine.dispose()
    progress(f"  filled in {time.monotonic() - started:.0f} s")


# -- one database: the steps ----------------------------------------------------------------------------


@dataclass
class Step:
    label: str
    conversations: int
    cpu_ms: float
    turns_per_s: float
    reads: dict[str, Read]
    rss_kib: int
    per_conversation_kib: float | None
    errors: int
    load: float
    """The host's 1-minute load average as the step ended: other work on the cores shows here."""
    turn_reference_us: float
    """The reference's CPU around the turns' window: the mean of its median just before the window
    and during the reads just after it."""


@dataclass
class Options:
    turns: int
    rows: int
    callers: int
    window: int
    reads: int
    budget: float
    steps: int


@contextlib.contextmanager
def database(kind: str, folder: Path) -> Iterator[tuple[str, str | None]]:
    """A fresh database: its URL, and its name on PostgreSQL (None for SQLite)."""
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{folder / f'growth-{uuid.uuid4().hex[:8]}.db'}", None
        return
    from bench.cluster import database as postgres

    with postgres() as url:
        yield url, url.rsplit("/", 1)[1]


@contextlib.contextmanager
def serve(config: Path, url: str, folder: Path) -> Iterator[tuple[int, int]]:
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--db", url]
    command += ["--caller-rate", "off", "--agent-rate", "off", "--log-level", "warning"]
    with server_process(
        command,
        f"http://{HOST}:{port}/healthz",
        timeout=180,
        quiet=True,
        env={"RANCH_ADMIN_KEY": ADMIN_KEY},
        log=folder / "server.log",
        cpus=SERVER_CPUS,
    ) as process:
        yield port, process.pid


def make_room(port: int) -> str:
    base = f"http://{HOST}:{port}/api/v1"
    with httpx.Client(base_url=base, headers={"X-API-Key": ADMIN_KEY}, timeout=30) as client:
        room = str(client.post("/rooms", json={"title": "growth"}).raise_for_status().json()["id"])
        for number in range(POSTS):
            client.post(f"/rooms/{room}/messages", json={"text": f"post {number}"}).raise_for_status()
    return room


def checkpoints(options: Options) -> list[int]:
    """Conversations at each step after the empty one: halving back from `turns`."""
    points = {max(options.turns >> shift, options.window * 2) for shift in range(options.steps)}
    return sorted(point for point in points if point <= options.turns)


class Run:
    """One server on one database, driven from step to step."""

    def __init__(self, port: int, pid: int, name: str | None, options: Options, deadline: float) -> None:
        self.port, self.meter, self.options, self.deadline = port, Meter(pid, name), options, deadline
        self.turns = Turns()

    def drive(self, count: int, deadline: float | None = None) -> float:
        """`count` more turns (fewer if `deadline`, or the run's, passes first); their wall time."""
        started = time.perf_counter()
        until = deadline or self.deadline
        asyncio.run(turns(self.port, self.turns.done, count, self.options.callers, until, self.turns))
        return time.perf_counter() - started

    def grow_to(self, conversations: int) -> None:
        while self.turns.done < conversations and time.monotonic() < self.deadline:
            self.drive(min(conversations - self.turns.done, 5_000))
            progress(f"  {self.turns.done:,} conversations, {self.turns.errors} errors")

    def step(self, label: str, room: str, base_rss: tuple[int, int] | None) -> Step:
        before_window = asyncio.run(reference(self.port, self.meter, self.options.reads))
        before, done = self.meter.ns(), self.turns.done
        seconds = self.drive(self.options.window, time.monotonic() + WINDOW_WITHIN)
        asyncio.run(self.meter.refresh())
        made = self.turns.done - done
        cpu_ms = (self.meter.ns() - before) / 1e6 / max(made, 1)
        measured = asyncio.run(reads(self.port, self.meter, PROBE, room, self.options.reads))
        time.sleep(1.0)  # the last turns' connections closed, their rows flushed
        rss = rss_kib(self.meter.pid)
        per = None
        if base_rss is not None and self.turns.done > base_rss[1]:
            per = (rss - base_rss[0]) / (self.turns.done - base_rss[1])
        progress(f"  step {label}: {cpu_ms:.2f} ms/turn, RSS {rss / 1024:.0f} MiB")
        errors = self.turns.errors + sum(read.errors for read in measured.values())
        around = (before_window.cpu_us + measured[REFERENCE].cpu_us) / 2
        return Step(
            label, self.turns.done, cpu_ms, made / seconds, measured, rss, per, errors, host_load(), around
        )


def restarted(
    config: Path,
    url: str,
    name: str | None,
    folder: Path,
    options: Options,
    done: Turns,
    room: str,
    label: str,
) -> Step:
    """A step measured on a server started again on the store (after a warm-up of turns)."""
    with serve(config, url, folder) as (port, pid):
        run = Run(port, pid, name, options, time.monotonic() + options.budget)
        run.turns = done
        run.drive(min(WARMUP, options.window), time.monotonic() + WINDOW_WITHIN)
        return run.step(label, room, None)


async def store_probe(url: str) -> None:
    """The task GetTask reads at every step: stored through the models, so no process holds it in
    memory (a task the server stored lately is read from its cache of recent tasks instead)."""
    from sqlalchemy import insert

    from ranch.db.engine import open_engine
    from ranch.db.models import ranch_tasks

    engine = open_engine(url)
    try:
        row = task_rows(0, 1, task_template(), time.time_ns() - 86400 * 10**9)[0]
        async with engine.begin() as connection:
            await connection.execute(insert(ranch_tasks), [{**row, "id": PROBE, "owner": OWNER}])
    finally:
        await engine.dispose()


def grow(kind: str, options: Options, folder: Path) -> list[Step]:
    config = folder / "team.yaml"
    config.write_text(CONFIG)
    deadline = time.monotonic() + options.budget
    steps: list[Step] = []
    with database(kind, folder) as (url, name):
        with serve(config, url, folder) as (port, pid):
            progress(f"{kind}: server up; the measured room and its {POSTS} posts")
            room = make_room(port)
            asyncio.run(store_probe(url))
            run = Run(port, pid, name, options, deadline)
            run.drive(min(WARMUP, options.window))
            empty = run.step("empty", room, None)
            steps.append(empty)
            base = (empty.rss_kib, empty.conversations)
            for point in checkpoints(options):
                if time.monotonic() > deadline:
                    progress(f"{kind}: the budget of {options.budget:g} s is spent; the steps stop here")
                    break
                run.grow_to(point - options.window)
                short = "" if run.turns.done >= point - options.window else " (budget spent)"
                steps.append(run.step(f"{point:,} conversations{short}", room, base))
            stored_turns = run.turns
        # the same store served by a fresh process: what a restart alone changes, apart from the fill
        steps.append(restarted(config, url, name, folder, options, stored_turns, room, RESTARTED))
        progress(f"{kind}: filling {options.rows:,} tasks, messages and events")
        fill_started = time.monotonic()
        asyncio.run(fill(url, options.rows, room))
        label = (
            f"+ {options.rows:,} tasks, messages, events (filled in {time.monotonic() - fill_started:.0f} s)"
        )
        steps.append(restarted(config, url, name, folder, options, stored_turns, room, label))
    if stored_turns.examples:
        progress(f"{kind}: first errors: {stored_turns.examples}")
    return steps


# -- the write cost of indexes and triggers -------------------------------------------------------------


@dataclass
class Written:
    cpu_us: float
    """CPU per row: this process (every thread; SQLite works in aiosqlite's) and, on PostgreSQL, the
    backend that wrote; the rows are built before the clock starts."""
    per_second: float


async def write_rates(url: str, name: str | None, variant: str, rows: int) -> dict[str, Written]:
    """The bulk writes into a fresh database at head, less what `variant` drops."""
    from sqlalchemy import insert, text

    from ranch.db import migrate
    from ranch.db.engine import open_engine
    from ranch.db.models import Organization, Room, RoomEvent, RoomMessage
    from ranch.tasks.store import _upsert

    engine = open_engine(url)
    postgres = engine.dialect.name == "postgresql"
    meter = Meter(os.getpid(), name)
    try:
        await migrate.upgrade(engine)
        async with engine.begin() as connection:
            if variant == INDEX_VARIANTS[1]:
                for index, _table in RETENTION_INDEXES:
                    await connection.execute(text(f"DROP INDEX {index}"))
            elif variant == INDEX_VARIANTS[2]:
                names = ("insert_delete", "update") if postgres else ("insert", "update", "delete")
                for trigger in names:
                    on = " ON ranch_tasks" if postgres else ""
                    await connection.execute(text(f"DROP TRIGGER ranch_task_counts_{trigger}{on}"))
            await connection.execute(insert(Organization), [{"id": "bench", "name": "bench"}])
            await connection.execute(insert(Room), [{"id": f"r{n}", "org_id": "bench"} for n in range(10)])
        template = task_template()
        upsert = _upsert(engine.dialect.name)
        batch = 100
        Batches = list[list[tuple[Any, list[dict[str, Any]]]]]

        async def timed(batches: Batches, written: int) -> Written:
            async with engine.connect() as connection:  # the pool's connection, and its backend, exist
                await connection.execute(text("SELECT 1"))
            await meter.refresh()
            before, started = meter.ns(), time.perf_counter()
            for statements in batches:
                async with engine.begin() as connection:
                    for statement, chunk in statements:
                        await connection.execute(statement, chunk)
            seconds = time.perf_counter() - started
            return Written((meter.ns() - before) / 1000 / written, written / seconds)

        saves: Batches = []
        for start in range(0, rows, batch):
            new = task_rows(start, min(batch, rows - start), template, 10**18)
            for row in new:
                row["state"] = "TASK_STATE_WORKING"
            saves.append([(upsert, new), (upsert, [{**row, "state": "TASK_STATE_COMPLETED"} for row in new])])
        posts: Batches = []
        for start in range(0, rows, batch):
            messages, events = [], []
            for number in range(start, min(rows, start + batch)):
                messages.append({"id": f"m{number}", "room_id": f"r{number % 10}", "sender_kind": "user",
                                 "sender_id": "u", "text": f"post {number}"})  # fmt: skip
                events.append({"room_id": f"r{number % 10}", "cursor": number + 1, "type": "message.created",
                               "data": {"id": f"m{number}", "text": f"post {number}"}})  # fmt: skip
            posts.append([(insert(RoomMessage), messages), (insert(RoomEvent), events)])
        return {"task saves": await timed(saves, 2 * rows), "messages + events": await timed(posts, 2 * rows)}
    finally:
        await engine.dispose()


def index_costs(kind: str, rows: int, rounds: int, folder: Path) -> dict[str, dict[str, Written]]:
    """Each variant's writes, best of `rounds` rounds taken in turns (the machine is shared: what
    another job takes from a run only slows it)."""
    best: dict[str, dict[str, Written]] = {}
    for _round in range(rounds):
        for variant in INDEX_VARIANTS:
            with database(kind, folder) as (url, name):
                measured = asyncio.run(write_rates(url, name, variant, rows))
            kept = best.setdefault(variant, measured)
            for key, written in measured.items():
                kept[key] = Written(
                    min(kept[key].cpu_us, written.cpu_us), max(kept[key].per_second, written.per_second)
                )
    return best


# -- the tables -----------------------------------------------------------------------------------------


def ratio(value: float, base: float) -> float:
    return value / base if base > 0 else 0.0


LABELS = {"sqlite": "SQLite", "postgres": "PostgreSQL"}


def speed(step: Step, empty: Step) -> float:
    """How much dearer the reference was at `step` than on the empty store (the machine's drift)."""
    return ratio(step.reads[REFERENCE].cpu_us, empty.reads[REFERENCE].cpu_us) or 1.0


def growth_ratios(step: Step, empty: Step) -> dict[str, tuple[float, float]]:
    """Each measure's ratio to the empty store: as measured, and over the reference's ratio."""
    drift = speed(step, empty)
    turn_drift = ratio(step.turn_reference_us, empty.turn_reference_us) or 1.0
    turn = ratio(step.cpu_ms, empty.cpu_ms)
    found = {"turn": (turn, turn / turn_drift)}
    for name in READS:
        raw = ratio(step.reads[name].cpu_us, empty.reads[name].cpu_us)
        found[name] = (raw, raw / drift)
    return found


def render_growth(kind: str, steps: list[Step]) -> str:
    empty = steps[0]
    rows = []
    for step in steps:
        ratios = growth_ratios(step, empty)
        reference = step.reads[REFERENCE]
        cells: list[object] = [step.label, f"{step.conversations:,}", f"{step.turns_per_s:,.0f}"]
        cells.append(f"{reference.cpu_us:,.0f} ({speed(step, empty):.2f}x)")
        raw, adjusted = ratios["turn"]
        cells.append(f"{step.cpu_ms:.2f} ({raw:.2f}x; {adjusted:.2f}x)")
        for name in READS:
            read = step.reads[name]
            raw, adjusted = ratios[name]
            cells.append(f"{read.cpu_us:,.0f} ({raw:.2f}x; {adjusted:.2f}x) / {read.p50_ms:.2f}")
        per = "-" if step.per_conversation_kib is None else f"{step.per_conversation_kib:.2f}"
        cells += [f"{step.rss_kib / 1024:.0f}", per, step.errors, f"{step.load:.1f}"]
        rows.append(cells)
    header = ["step", "conversations", "turns/s", "reference: CPU µs (vs empty)", "CPU ms/turn (vs empty)"]
    header += [f"{name}: CPU µs (vs empty) / p50 ms" for name in READS]
    header += ["RSS MiB", "KiB/idle conv", "errors", "host load"]
    note = (
        "CPU: the ranch process (every thread) plus, on PostgreSQL, its client backends; a read's "
        "figure is the median of its calls, one at a time, the reads taking turns. (vs empty): the "
        "ratio to the empty store as measured; then the same over the reference's ratio (a SendMessage "
        "to the echo member, which stores and reads nothing: the cores are shared, and a step that met "
        "a busier machine pays more for everything; for the turns, the reference's mean just before "
        "their window and during the reads after it). The last step is the same database with the fill "
        "added and the server started again (its RSS is a fresh process's)."
    )
    return table(f"Growth, {LABELS[kind]}", header, rows, note)


def render_targets(results: dict[str, list[Step]]) -> str:
    rows = []
    for kind, every in results.items():
        empty = every[0]
        steps = [step for step in every if step.label != RESTARTED]  # a control, not a larger store
        ratios = [growth_ratios(step, empty) for step in steps[1:]]
        for name, what in (("turn", "CPU per turn"), *((name, f"{name} CPU") for name in READS)):
            raw = max(found[name][0] for found in ratios)
            adjusted = max(found[name][1] for found in ratios)
            met = "met" if adjusted <= 1.2 else "not met"
            rows.append([f"{what}, {LABELS[kind]}", "<= 1.2x", f"{raw:.2f}x", f"{adjusted:.2f}x", met])
        grown = [step for step in every if step.per_conversation_kib is not None]
        if grown:
            last = grown[-1]
            per = last.per_conversation_kib or 0.0
            what = f"RSS per idle conversation at {last.conversations:,}, {LABELS[kind]}"
            rows.append([what, "<= 16 KiB", f"{per:.2f} KiB", "-", "met" if per <= 16 else "not met"])
    note = (
        "Worst step against the empty store, as measured and over the reference's ratio (met is judged "
        "on the latter); the restarted server's step (the same store as the step before it) is a "
        "control for the last one and is left out."
    )
    header = ["target", "bound", "worst, measured", "worst, over the reference", "met"]
    return table("Growth targets", header, rows, note)


def render_index_costs(results: dict[str, dict[str, dict[str, Written]]], rows: int, rounds: int) -> str:
    lines = []
    for kind, variants in results.items():
        head = variants[INDEX_VARIANTS[0]]
        for variant, measured in variants.items():
            line: list[object] = [LABELS[kind], variant]
            for key, written in measured.items():
                line.append(f"{written.cpu_us:.1f} ({ratio(written.cpu_us, head[key].cpu_us):.2f}x)")
                line.append(f"{written.per_second:,.0f}")
            lines.append(line)
    note = (
        f"{rows:,} tasks, each saved twice through the store's upsert (new, then completed), then {rows:,} "
        "messages with their events, in transactions of 100 rows per statement (as the group commit "
        "sends them) into a fresh database. CPU per row written: this process (SQLite writes in its "
        "aiosqlite thread) plus, on PostgreSQL, the backend; the rows are built before the clock starts. "
        f"Best of {rounds} rounds taken in turns."
    )
    header = ["database", "schema", "task save: CPU µs (vs head)", "saves/s"]
    header += ["message or event: CPU µs (vs head)", "rows/s"]
    return table("Write cost of the retention indexes and the count triggers", header, lines, note)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="bench.growth", description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--turns", type=int, default=100_000, help="conversations at the last step (0: the write cost only)"
    )
    parser.add_argument("--rows", type=int, default=1_000_000, help="tasks, messages and events filled")
    parser.add_argument("--db", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--callers", type=int, default=8)
    parser.add_argument("--window", type=int, default=2_000, help="turns measured at each step")
    parser.add_argument("--reads", type=int, default=40, help="calls of each read at each step")
    parser.add_argument("--steps", type=int, default=4, help="steps between empty and --turns")
    parser.add_argument("--budget", type=float, default=1500.0, help="seconds of turns per database")
    parser.add_argument(
        "--index-rows", type=int, default=20_000, help="rows of the write-cost runs (0: skip)"
    )
    parser.add_argument("--index-rounds", type=int, default=5, help="write-cost rounds (the best is kept)")
    parsed = parser.parse_args(argv or [])
    window = max(10, min(parsed.window, parsed.turns // 4))
    options = Options(
        parsed.turns, parsed.rows, parsed.callers, window, parsed.reads, parsed.budget, parsed.steps
    )
    kinds = ["sqlite", "postgres"] if parsed.db == "both" else [parsed.db]
    results: dict[str, list[Step]] = {}
    costs: dict[str, dict[str, dict[str, Written]]] = {}
    with tempfile.TemporaryDirectory(prefix="ranch-growth-") as tmp:
        for kind in kinds if parsed.turns else ():
            results[kind] = grow(kind, options, Path(tmp))
        if parsed.index_rows:
            for kind in kinds:
                progress(f"{kind}: write cost of the indexes, {parsed.index_rows:,} rows a run")
                costs[kind] = index_costs(kind, parsed.index_rows, parsed.index_rounds, Path(tmp))
    text = "\n".join(render_growth(kind, steps) for kind, steps in results.items())
    if results:
        text += "\n" + render_targets(results)
    if costs:
        text += "\n" + render_index_costs(costs, parsed.index_rows, parsed.index_rounds)
    print(text)
    return text


if __name__ == "__main__":
    main(sys.argv[1:])
