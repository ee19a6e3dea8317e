"""Wire: SendMessage, SendStreamingMessage and GetTask for an echo agent, three servers side by side.

ranch vs the a2a-sdk's DefaultRequestHandler serving the same agent vs a bare
Starlette endpoint returning a fixed body (the limit). One uvicorn worker each;
load from a separate process (bench/load.py) at concurrency 1 and 32.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.common import LOAD_CPUS, SERVER_CPUS, cpu_seconds, free_port, median, pinned, server_process, table

KINDS = ("ranch", "sdk", "bare")
LABELS = {"ranch": "ranch", "sdk": "a2a-sdk DefaultRequestHandler", "bare": "bare Starlette (fixed body)"}
HEADERS = {"A2A-Version": "1.0"}


@dataclass(frozen=True)
class Operation:
    name: str
    method: str
    paths: dict[str, str]


OPERATIONS = (
    Operation("SendMessage", "SendMessage", {"ranch": "/a2a/agents/echo", "sdk": "/", "bare": "/"}),
    Operation(
        "SendStreamingMessage",
        "SendStreamingMessage",
        {"ranch": "/a2a/agents/echo", "sdk": "/", "bare": "/stream"},
    ),
    Operation("GetTask", "GetTask", {"ranch": "/a2a/agents/tasker", "sdk": "/task/", "bare": "/task/"}),
)
MESSAGE: dict[str, object] = {
    "message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "hello"}]}
}


def rpc(method: str, params: dict[str, object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def make_task(base: str, path: str) -> str:
    """Create one completed task to read back with GetTask."""
    response = httpx.post(base + path, json=rpc("SendMessage", MESSAGE), headers=HEADERS, timeout=10).json()
    task_id: str = response["result"]["task"]["id"]
    return task_id


def load(url: str, body: dict[str, object], concurrency: int, seconds: float) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(body, handle)
    command = [sys.executable, "-m", "bench.load", url, handle.name, "--concurrency", str(concurrency)]
    command += ["--seconds", str(seconds), "--header", "A2A-Version:1.0"]
    output = subprocess.run(
        command,
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
        preexec_fn=pinned(LOAD_CPUS),
    )
    Path(handle.name).unlink()
    return dict(json.loads(output.stdout))


@dataclass
class Server:
    """One of the three servers, running for the whole benchmark."""

    kind: str
    base: str
    pid: int
    task_id: str

    def sample(self, operation: Operation, concurrency: int, seconds: float) -> dict[str, float]:
        """One load run, plus the server's CPU time per request over it."""
        params: dict[str, object] = {"id": self.task_id} if operation.method == "GetTask" else MESSAGE
        before = cpu_seconds(self.pid)
        row = load(
            self.base + operation.paths[self.kind], rpc(operation.method, params), concurrency, seconds
        )
        row["cpu_us"] = (cpu_seconds(self.pid) - before) / max(1.0, row["requests"]) * 1e6
        return row


@contextlib.contextmanager
def serving(kind: str) -> Iterator[Server]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    health = f"{base}/healthz" if kind == "ranch" else base
    command = [sys.executable, "-m", "bench.servers", kind, str(port)]
    with server_process(command, health, quiet=True, cpus=SERVER_CPUS) as process:
        task_id = "fixed" if kind == "bare" else make_task(base, OPERATIONS[2].paths[kind])
        yield Server(kind, base, process.pid, task_id)


def measure(seconds: float, rounds: int) -> dict[tuple[str, int, str], dict[str, float]]:
    """Every (operation, concurrency) row: `rounds` samples per server, servers taking turns.

    The machine's speed drifts over minutes; interleaving the three servers, taking one sample of
    every row per round, and keeping the medians puts the drift into every server's samples alike
    and lets one slow spell spoil one sample of a row, not the row.
    """
    samples: dict[tuple[str, int, str], list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        servers = [stack.enter_context(serving(kind)) for kind in KINDS]
        for turn in range(rounds):  # rounds outermost: a slow spell of the machine hits one sample per row
            for operation in OPERATIONS:
                for concurrency in (1, 32):
                    for server in servers[turn % 3 :] + servers[: turn % 3]:
                        key = (operation.name, concurrency, server.kind)
                        samples.setdefault(key, []).append(server.sample(operation, concurrency, seconds))
    return {
        key: {
            field: median([row[field] for row in rows])
            for field in ("rps", "events_per_s", "p50_ms", "p99_ms", "cpu_us")
        }
        | {"errors": sum(row["errors"] for row in rows)}
        for key, rows in samples.items()
    }


def main(argv: list[str] | None = None) -> str:
    seconds = float(argv[0]) if argv else 2.0
    rounds = int(argv[1]) if argv and len(argv) > 1 else 3
    results = measure(seconds, rounds)
    rows = []
    for operation in OPERATIONS:
        for concurrency in (1, 32):
            sdk = results[(operation.name, concurrency, "sdk")]["rps"]
            bare = results[(operation.name, concurrency, "bare")]["rps"]
            for kind in KINDS:
                row = results[(operation.name, concurrency, kind)]
                rate = row["events_per_s"] if operation.method == "SendStreamingMessage" else row["rps"]
                rows.append(
                    [
                        operation.name,
                        concurrency,
                        LABELS[kind],
                        f"{rate:,.0f}",
                        f"{row['p50_ms']:.2f}",
                        f"{row['p99_ms']:.2f}",
                        f"{row['cpu_us']:.0f}",
                        int(row["errors"]),
                        f"{row['rps'] / sdk:.2f}x",
                        f"{row['rps'] / bare:.2f}x",
                    ]  # fmt: skip
                )
    header = [
        "operation",
        "c",
        "server",
        "req/s (events/s for streams)",
        "p50 ms",
        "p99 ms",
        "server CPU µs/req",
        "errors",
        "vs a2a-sdk",
        "vs bare",
    ]
    pinning = "no pinning"
    if SERVER_CPUS and LOAD_CPUS:
        pinning = f"server pinned to core {min(SERVER_CPUS)}, load to {sorted(LOAD_CPUS)}"
    note = (
        f"Echo agent, one uvicorn worker per server ({pinning}); load from a separate process. "
        f"Each row is the median of {rounds} samples of {seconds:g} s, one per round over all rows, "
        "the three servers taking turns."
    )
    section = table("Wire", header, rows, note)
    print(section)
    return section


if __name__ == "__main__":
    main(sys.argv[1:])
