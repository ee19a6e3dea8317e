"""`python -m bench.fanout`: one event fanned out to S subscribers of one task, S = 100 and 1000.

A team whose single member is a probe (tests/_support/probes.py) that sleeps, then replies, served by
`ranch serve` in its own process. For each S the benchmark starts a team task with SendMessage
(`returnImmediately`, so the answer carries the task id while the probe sleeps), opens S
subscribers with JSON-RPC `SubscribeToTask` over SSE (raw asyncio streams with keep-alive and
chunked transfer decoding, all in this process), waits until every one has the task snapshot,
then records when each receives the artifact-update event carrying the member's reply. The
reply time is the timestamp of the final COMPLETED status, stamped by the server right after it
published that artifact (same clock: both processes run on this machine).

Receive times are taken the moment a chunk is read; the events are parsed after the round, so the
client adds as little as it can to the spread. Server CPU per subscriber covers delivering the
artifact and final status and closing the stream; memory per subscriber is the server's RSS
growth while the S streams are open.

`--profile FILE` records the server with py-spy (raw format) from the moment the largest S
is subscribed until just after the reply.

Everything binds and connects to 127.0.0.1; every loop is bounded in events and seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from bench.common import (
    HOST,
    cpu_seconds,
    free_port,
    jsonrpc_post,
    percentile,
    raise_open_files,
    ranch_serve,
    read_body,
    read_chunk,
    read_head,
    rss_kib,
    server_process,
    table,
)

SLEEP = 6.0
"""Seconds the member sleeps before replying; every subscriber must be in place by then."""
REPLY = "the one reply every subscriber waits for"
CONFIG = f"""\
agents:
  - id: sleeper
    kind: python
    entry: _support.probes:Probe
    options: {{sleep: {SLEEP}, reply: "{REPLY}"}}
teams:
  - id: solo
    members: [sleeper]
    default_agent: sleeper
"""
PATH = "/a2a/agents/solo"
SIZES = (100, 1000)
MAX_CHUNKS = 64
"""A subscriber stops reading after this many chunks (the stream has about four)."""
GRACE = 30.0
"""Seconds after the reply is due by which every stream must have ended."""
CONNECT_BATCH = 200
"""Subscriptions opened at once; more queue behind them (the listen backlog is finite)."""


@dataclass
class Subscriber:
    chunks: list[tuple[float, bytes]] = field(default_factory=list)
    snapshot_at: float | None = None
    error: str | None = None


@dataclass
class Result:
    size: int
    got: int
    ready: int
    subscribe_seconds: float
    spread_ms: float
    reply_to_first_ms: float
    reply_to_p50_ms: float
    reply_to_last_ms: float
    cpu_ms_per_subscriber: float
    kib_per_subscriber: float
    errors: list[str]


async def start_task(port: int, context_id: str) -> tuple[str, float]:
    """A team task whose member is now sleeping: its id and the WORKING status timestamp."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        message = {
            "role": "ROLE_USER",
            "messageId": f"{context_id}-m",
            "contextId": context_id,
            "parts": [{"text": "wake me when you are done"}],
        }
        params = {"message": message, "configuration": {"returnImmediately": True}}
        writer.write(jsonrpc_post(PATH, "SendMessage", params))
        status, headers = await read_head(reader)
        body = await read_body(reader, headers)
    finally:
        writer.close()
    task = orjson.loads(body).get("result", {}).get("task") if status == 200 else None
    if not task:
        raise SystemExit(f"SendMessage did not start a task: HTTP {status} {body[:300]!r}")
    return str(task["id"]), stamp(task["status"].get("timestamp", ""))


def stamp(text: str) -> float:
    """An RFC 3339 timestamp as Unix seconds (0.0 when there is none)."""
    return datetime.fromisoformat(text).timestamp() if text else 0.0


async def subscribe(
    port: int, task_id: str, sub: Subscriber, gate: asyncio.Semaphore, ready: Callable[[], None]
) -> None:
    """One SSE subscriber: read chunks, with their receive times, until the stream ends."""
    async with gate:
        try:
            reader, writer = await asyncio.open_connection(HOST, port)
        except OSError as exc:
            sub.error = f"connect: {exc!r}"
            ready()
            return
        writer.write(jsonrpc_post(PATH, "SubscribeToTask", {"id": task_id}))
        try:
            status, headers = await read_head(reader)
            if status != 200 or headers.get("transfer-encoding", "").lower() != "chunked":
                sub.error = f"HTTP {status}: {(await read_body(reader, headers))[:200]!r}"
                writer.close()
                ready()
                return
        except (OSError, asyncio.IncompleteReadError) as exc:
            sub.error = f"subscribe: {exc!r}"
            writer.close()
            ready()
            return
    try:
        for _ in range(MAX_CHUNKS):
            chunk = await read_chunk(reader)
            if not chunk:
                break
            sub.chunks.append((time.time(), chunk))
            if sub.snapshot_at is None and b'"task"' in chunk:
                sub.snapshot_at = time.time()
                ready()
    except (OSError, asyncio.IncompleteReadError) as exc:
        sub.error = f"stream: {exc!r}"
    finally:
        if sub.snapshot_at is None:
            ready()
        writer.close()


def events(sub: Subscriber) -> list[tuple[float, dict[str, Any]]]:
    """The subscriber's SSE events (`data:` payloads), each with the time its last chunk arrived."""
    found: list[tuple[float, dict[str, Any]]] = []
    pending = b""
    for received, chunk in sub.chunks:
        pending += chunk
        blocks = pending.replace(b"\r\n", b"\n").split(b"\n\n")
        pending = blocks.pop()
        for block in blocks:
            data = [line[5:].strip() for line in block.split(b"\n") if line.startswith(b"data:")]
            if data:
                found.append((received, orjson.loads(b"\n".join(data))))
    return found


def reply_times(subs: list[Subscriber]) -> tuple[list[float], float, list[str]]:
    """When each subscriber got the reply artifact, the final status timestamp, and what went wrong."""
    received: list[float] = []
    final = 0.0
    errors = [sub.error for sub in subs if sub.error]
    for sub in subs:
        got = None
        for at, payload in events(sub):
            if "error" in payload:
                errors.append(f"JSON-RPC error {payload['error']}")
            result = payload.get("result", {})
            artifact = result.get("artifactUpdate", {}).get("artifact", {})
            texts = [part.get("text") for part in artifact.get("parts", [])]
            if got is None and REPLY in texts:
                got = at
            status = result.get("statusUpdate", {}).get("status", {})
            if status.get("state") == "TASK_STATE_COMPLETED":
                final = final or stamp(status.get("timestamp", ""))
        if got is not None:
            received.append(got)
    return received, final, errors


def start_profile(pid: int, seconds: float, output: Path) -> subprocess.Popen[bytes]:
    command = [str(Path(sys.executable).parent / "py-spy"), "record", "-p", str(pid), "--nonblocking"]
    command += ["-d", str(max(1, math.ceil(seconds))), "-f", "raw", "-o", str(output)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def fan_out(port: int, size: int, pid: int, profile: Path | None = None) -> Result:
    task_id, working = await start_task(port, f"fanout-{size}")
    rss = rss_kib(pid)
    subs = [Subscriber() for _ in range(size)]
    all_ready = asyncio.Event()
    count = [0]

    def ready() -> None:
        count[0] += 1
        if count[0] >= size:
            all_ready.set()

    gate = asyncio.Semaphore(CONNECT_BATCH)
    started = time.time()
    streams = [asyncio.create_task(subscribe(port, task_id, sub, gate, ready)) for sub in subs]
    due = working + SLEEP
    try:
        await asyncio.wait_for(all_ready.wait(), timeout=max(due - time.time() - 0.2, 0.1))
    except TimeoutError:
        pass
    subscribed = time.time() - started
    spy = start_profile(pid, due - time.time() + 1.5, profile) if profile is not None else None
    kib = (rss_kib(pid) - rss) / size
    cpu = cpu_seconds(pid)
    done, slow = await asyncio.wait(streams, timeout=max(due + GRACE - time.time(), 1.0))
    for stream in slow:
        stream.cancel()
    cpu = cpu_seconds(pid) - cpu
    if spy is not None:
        try:
            spy.wait(timeout=GRACE)
        except subprocess.TimeoutExpired:
            spy.kill()
    received, final, errors = reply_times(subs)
    ontime = sum(1 for sub in subs if sub.snapshot_at is not None and sub.snapshot_at < (final or due))
    reply = final or due
    first, last = (min(received), max(received)) if received else (0.0, 0.0)
    return Result(
        size=size,
        got=len(received),
        ready=ontime,
        subscribe_seconds=subscribed,
        spread_ms=(last - first) * 1000,
        reply_to_first_ms=(first - reply) * 1000,
        reply_to_p50_ms=(percentile(received, 0.5) - reply) * 1000 if received else 0.0,
        reply_to_last_ms=(last - reply) * 1000,
        cpu_ms_per_subscriber=cpu * 1000 / size,
        kib_per_subscriber=kib,
        errors=errors[:3] + ([f"{len(slow)} streams still open after {GRACE:g} s"] if slow else []),
    )


def render(results: list[Result]) -> str:
    rows = [
        [
            r.size,
            f"{r.got}/{r.size}",
            f"{r.ready}/{r.size}",
            f"{r.subscribe_seconds:.2f}",
            f"{r.spread_ms:.1f}",
            f"{r.reply_to_first_ms:.1f}",
            f"{r.reply_to_p50_ms:.1f}",
            f"{r.reply_to_last_ms:.1f}",
            f"{r.cpu_ms_per_subscriber:.3f}",
            f"{r.kib_per_subscriber:.1f}",
        ]
        for r in results
    ]
    note = (
        f"One team task; its single member (a probe) sleeps {SLEEP:g} s, then replies. S subscribers "
        "(`SubscribeToTask`, SSE, one connection each, raw asyncio client in the benchmark process) "
        "all hold the task snapshot before the reply. got: subscribers that received the "
        "artifact-update event with the reply (must be all). Reply time: the server's timestamp on "
        "the final COMPLETED status, stamped right after the artifact was published. Server CPU per "
        "subscriber: delivering the artifact and final status and closing the stream; KiB per "
        "subscriber: server RSS growth with the S streams open."
    )
    header = [
        "S",
        "got reply",
        "snapshot before reply",
        "subscribe all s",
        "first -> last ms",
        "reply -> first ms",
        "reply -> p50 ms",
        "reply -> last ms",
        "server CPU ms/subscriber",
        "server KiB/subscriber",
    ]
    text = table("One event fanned out to S subscribers of one task", header, rows, note)
    problems = [f"S={r.size}: {e}" for r in results for e in r.errors]
    if problems:
        text += "\nErrors: " + "; ".join(problems) + "\n"
    return text


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="subscriber counts")
    parser.add_argument("--profile", type=Path, help="py-spy raw profile of the server around the largest S")
    args = parser.parse_args(argv)
    raise_open_files(max(args.sizes) * 2 + 256)
    results = []
    with tempfile.TemporaryDirectory(prefix="ranch-fanout-") as tmp:
        workdir = Path(tmp)
        config = workdir / "solo.yaml"
        config.write_text(CONFIG)
        port = free_port()
        command = ranch_serve(config, port, workdir / "fanout.db")
        with server_process(command, f"http://{HOST}:{port}/healthz", quiet=True) as server:
            for size in args.sizes:
                profile = args.profile if size == max(args.sizes) else None
                results.append(asyncio.run(fan_out(port, size, server.pid, profile)))
    text = render(results)
    print(text)
    return text


if __name__ == "__main__":
    main()
