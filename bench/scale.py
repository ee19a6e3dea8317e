"""`python -m bench.scale`: N concurrent team conversations with in-process members, N = 10, 100, 1000.

A team of three in-process members (`rules` triage and worker, an `echo` writer) served by
`ranch serve` in its own process, with its tasks in a fresh SQLite file per N. Every user turn
takes 3 hops: triage -> worker -> back to its sender (triage) -> user. For each N the benchmark
opens N keep-alive connections at once (raw asyncio streams, one per conversation, in this
process) and each conversation sends 3 turns in sequence (SendMessage, non-streaming) in its own
contextId. A turn is an error unless it answers HTTP 200 with a COMPLETED task carrying 3 hop
artifacts within the time budget; the database is then read to check every such task was stored,
COMPLETED. A small N repeats its batch of N conversations, after its memory is read, so its
latency has enough samples.

Memory per idle conversation is ((server RSS once all N conversations have ended, their
connections are closed and a short settle has passed) - (RSS before, after a warm-up)) / N. The
peak column is the growth of the server's RSS high-water mark over N; the database column the
growth of the SQLite file over N. Server CPU per turn comes from /proc/PID/stat. `--profile FILE`
records the server with py-spy (raw format) during the largest N.

Everything binds and connects to 127.0.0.1; every loop is bounded in turns and seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench.common import (
    HOST,
    cpu_seconds,
    free_port,
    jsonrpc_post,
    median,
    percentile,
    raise_open_files,
    ranch_serve,
    read_body,
    read_head,
    rss_kib,
    server_process,
    table,
)

CONFIG = """\
agents:
  - id: triage
    kind: rules
    rules:
      - {match: "^worker:", reply: "Done: {text}", route: user, reason: worker finished}
      - {reply: "For the worker: {text}", route: worker, reason: needs work}
  - id: worker
    kind: rules
    rules:
      - {reply: "worker: {text}", route: sender, reason: back to sender}
  - id: writer
    kind: echo
teams:
  - id: desk
    members: [triage, worker, writer]
    default_agent: triage
"""
PATH = "/a2a/agents/desk"
SIZES = (10, 100, 1000)
TURNS = 3
HOPS = 3
WARMUP = 20
"""Conversations run (and left idle) before the baseline RSS is read."""
BUDGET = (10.0, 0.05, 60.0)
"""Seconds one N's rounds may take: base + per conversation, capped; turns not answered by then are errors."""
SETTLE = 1.5
MIN_TURNS = 300
"""A small N runs more rounds of N conversations (after its memory is read) for this many latency samples."""
PROFILE_SECONDS = 5


@dataclass
class Outcome:
    latencies: list[float] = field(default_factory=list)
    completed: int = 0
    errors: int = 0
    examples: list[str] = field(default_factory=list)

    def fail(self, why: str, turns: int = 1) -> None:
        self.errors += turns
        if len(self.examples) < 3:
            self.examples.append(why)

    def merge(self, other: Outcome) -> None:
        self.latencies += other.latencies
        self.completed += other.completed
        self.errors += other.errors
        self.examples = (self.examples + other.examples)[:3]


@dataclass
class Row:
    n: int
    rounds: int
    seconds: float
    outcome: Outcome
    unstored: int
    cpu: float
    rss_kib: int
    second_kib: int
    peak_kib: int
    db_bytes: int

    @property
    def turns(self) -> int:
        return len(self.outcome.latencies)


def problem(status: int, body: bytes) -> str | None:
    """Why this SendMessage response is not a completed 3-hop turn, or None."""
    if status != 200:
        return f"HTTP {status}: {body[:200]!r}"
    try:
        payload: dict[str, Any] = orjson.loads(body)
    except orjson.JSONDecodeError:
        return f"not JSON: {body[:200]!r}"
    if "error" in payload:
        return f"JSON-RPC error {payload['error']}"
    task = payload.get("result", {}).get("task", {})
    state = task.get("status", {}).get("state")
    if state != "TASK_STATE_COMPLETED":
        return f"task state {state}: {str(task.get('status', {}).get('message'))[:300]}"
    if len(task.get("artifacts", [])) != HOPS:
        return f"{len(task.get('artifacts', []))} hop artifacts, not {HOPS}"
    return None


def turn_request(context_id: str, turn: int) -> bytes:
    message = {
        "role": "ROLE_USER",
        "messageId": f"{context_id}-{turn}",
        "contextId": context_id,
        "parts": [{"text": f"turn {turn} of {context_id}: please handle this"}],
    }
    return jsonrpc_post(PATH, "SendMessage", {"message": message}, request_id=turn)


async def converse(port: int, context_id: str, outcome: Outcome, deadline: float) -> None:
    """One conversation: TURNS turns in sequence over one keep-alive connection, until `deadline`."""
    try:
        async with asyncio.timeout(max(deadline - time.perf_counter(), 0)):
            reader, writer = await asyncio.open_connection(HOST, port)
    except (OSError, TimeoutError) as exc:
        outcome.fail(f"connect: {exc!r}", TURNS)
        return
    try:
        for turn in range(TURNS):
            started = time.perf_counter()
            writer.write(turn_request(context_id, turn))
            try:
                async with asyncio.timeout(max(deadline - started, 0)):
                    status, headers = await read_head(reader)
                    body = await read_body(reader, headers)
            except (OSError, asyncio.IncompleteReadError, TimeoutError) as exc:
                outcome.fail(f"turn {turn}: {exc!r}", TURNS - turn)
                return
            outcome.latencies.append(time.perf_counter() - started)
            why = problem(status, body)
            if why is None:
                outcome.completed += 1
            else:
                outcome.fail(why)
    finally:
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass


def budget(n: int) -> float:
    base, per_conversation, cap = BUDGET
    return min(base + per_conversation * n, cap)


async def conversations(port: int, count: int, prefix: str, deadline: float) -> tuple[Outcome, float]:
    """`count` conversations at once; their outcome and the wall time they took."""
    outcome = Outcome()
    started = time.perf_counter()
    await asyncio.gather(*(converse(port, f"{prefix}-{i}", outcome, deadline) for i in range(count)))
    return outcome, time.perf_counter() - started


def stored(database: Path, prefix: str) -> int:
    """Tasks of conversations whose names start with `prefix` that the server stored as COMPLETED."""
    with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True)) as db:
        query = "SELECT count(*) FROM ranch_tasks WHERE context_id LIKE ? AND state = 'TASK_STATE_COMPLETED'"
        count: int = db.execute(query, (f"{prefix}%",)).fetchone()[0]
        return count


def db_size(database: Path) -> int:
    """The SQLite file and any journal beside it, in bytes."""
    files = [database, *database.parent.glob(database.name + "-*")]
    return sum(path.stat().st_size for path in files if path.exists())


def start_profile(pid: int, output: Path) -> subprocess.Popen[bytes]:
    command = [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "--nonblocking"]
    command += ["-d", str(PROFILE_SECONDS), "-f", "raw", "-o", str(output)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def measure(config: Path, n: int, workdir: Path, profile: Path | None) -> Row:
    """N conversations against a fresh server and database."""
    port = free_port()
    database = workdir / f"scale-{n}.db"
    command = ranch_serve(config, port, database)
    with server_process(command, f"http://{HOST}:{port}/healthz", quiet=True) as server:
        warm, _ = asyncio.run(conversations(port, WARMUP, f"warm{n}", time.perf_counter() + budget(WARMUP)))
        if warm.errors:
            raise SystemExit(f"warm-up failed: {warm.examples}")
        time.sleep(SETTLE)
        pid = server.pid
        rss, peak, cpu, size = rss_kib(pid), rss_kib(pid, "VmHWM"), cpu_seconds(pid), db_size(database)
        spy = start_profile(pid, profile) if profile is not None else None
        deadline = time.perf_counter() + budget(n)
        outcome, seconds = asyncio.run(conversations(port, n, f"n{n}-r0", deadline))
        cpu = cpu_seconds(pid) - cpu
        if spy is not None:
            try:
                spy.wait(timeout=PROFILE_SECONDS + 20)
            except subprocess.TimeoutExpired:
                spy.kill()
        time.sleep(SETTLE)
        rss, peak, size = rss_kib(pid) - rss, rss_kib(pid, "VmHWM") - peak, db_size(database) - size
        # a second batch of N idle conversations: what each costs once the allocator is warm
        before_second = rss_kib(pid)
        second, _ = asyncio.run(conversations(port, n, f"m{n}", time.perf_counter() + budget(n)))
        if second.errors:
            raise SystemExit(f"second batch failed: {second.examples}")
        time.sleep(SETTLE)
        second_kib = rss_kib(pid) - before_second
        rounds = max(1, math.ceil(MIN_TURNS / (n * TURNS)))
        for r in range(1, rounds):  # small N: more samples for latency, after the memory reading
            before = cpu_seconds(pid)
            more, took = asyncio.run(conversations(port, n, f"n{n}-r{r}", deadline))
            cpu += cpu_seconds(pid) - before
            seconds += took
            outcome.merge(more)
        return Row(
            n=n,
            rounds=rounds,
            seconds=seconds,
            outcome=outcome,
            unstored=outcome.completed - stored(database, f"n{n}-r"),
            cpu=cpu,
            rss_kib=rss,
            second_kib=second_kib,
            peak_kib=peak,
            db_bytes=size,
        )


def ratio(value: float, base: float) -> str:
    return f"{value / base:.2f}x" if base > 0 else "n/a"


def render(rows: list[Row]) -> str:
    base = rows[0]
    base_p50 = median(base.outcome.latencies)
    base_mem = base.rss_kib / base.n
    lines = []
    for row in rows:
        p50 = median(row.outcome.latencies)
        per_conv = row.rss_kib / row.n
        lines.append(
            [
                row.n,
                f"{row.rounds} x {row.n * TURNS}",
                f"{row.turns / row.seconds:.0f}",
                f"{p50 * 1000:.1f}",
                f"{percentile(row.outcome.latencies, 0.99) * 1000:.1f}",
                ratio(p50, base_p50),
                f"{row.cpu / max(row.turns, 1) * 1000:.2f}",
                row.outcome.errors,
                row.unstored,
                f"{per_conv:.1f}",
                ratio(per_conv, base_mem),
                f"{row.second_kib / row.n:.1f}",
                f"{row.peak_kib / row.n:.1f}",
                f"{row.db_bytes / row.n / 1024:.1f}",
            ]
        )
    note = (
        f"A team of 3 in-process members (`rules`, `rules`, `echo`); each turn makes {HOPS} hops "
        f"(triage -> worker -> triage -> user). N conversations at once, {TURNS} turns each in sequence "
        "in its own contextId (SendMessage; one keep-alive connection per conversation; raw asyncio "
        "client in the benchmark process); one `ranch serve` process and a fresh SQLite file per N. "
        f"A small N repeats its batch (rounds x turns) so latency has >= {MIN_TURNS} samples; memory and "
        "DB are read after the first round. "
        "errors: turns not answered 200 + COMPLETED with 3 hop artifacts in time "
        f"(N=1000: {budget(1000):g} s); not stored: answered turns missing from the database as COMPLETED. "
        f"RSS/idle conv: server RSS growth over N once every conversation ended, its connection "
        f"closed and {SETTLE:g} s passed (after a {WARMUP}-conversation warm-up); peak: growth of the "
        "RSS high-water mark over N; second batch: RSS growth for N more conversations run after the first "
        "(the marginal cost of an idle conversation once the allocator holds the first batch's peak); "
        "DB: growth of the SQLite file over N. Targets: 0 errors at "
        "N=1000, <= 50 KB per idle conversation, linear cost."
    )
    header = [
        "N",
        "turns",
        "turns/s",
        "p50 ms",
        "p99 ms",
        "p50 vs N=10",
        "server CPU ms/turn",
        "errors",
        "not stored",
        "RSS KiB/idle conv",
        "vs N=10",
        "second batch KiB/conv",
        "peak KiB/conv",
        "DB KiB/conv",
    ]
    text = table("Concurrent team conversations (3 hops per turn)", header, lines, note)
    problems = [f"N={row.n}: {example}" for row in rows for example in row.outcome.examples]
    if problems:
        text += "\nFirst errors: " + "; ".join(problems) + "\n"
    return text


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        type=int,
        nargs="+",
        default=list(SIZES),
        help="conversation counts (the first is the base)",
    )
    parser.add_argument("--profile", type=Path, help="py-spy raw profile of the server during the largest N")
    args = parser.parse_args(argv)
    raise_open_files(max(args.sizes) * 2 + 256)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ranch-scale-") as tmp:
        workdir = Path(tmp)
        config = workdir / "team.yaml"
        config.write_text(CONFIG)
        for index, n in enumerate(args.sizes):
            last = index == len(args.sizes) - 1
            rows.append(measure(config, n, workdir, args.profile if last else None))
    text = render(rows)
    print(text)
    return text


if __name__ == "__main__":
    main()
