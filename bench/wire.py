"""Wire: SendMessage, SendStreamingMessage and GetTask for an echo agent, three servers side by side.

ranch vs the a2a-sdk's DefaultRequestHandler serving the same agent vs a bare
Starlette endpoint returning a fixed body (the limit). One uvicorn worker each;
load from a separate process (bench/load.py) at concurrency 1 and 32.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from bench.common import free_port, server_process, table

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
    output = subprocess.run(command, capture_output=True, text=True, check=True, timeout=seconds + 60)
    Path(handle.name).unlink()
    return dict(json.loads(output.stdout))


def measure(kind: str, seconds: float) -> dict[tuple[str, int], dict[str, float]]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    health = f"{base}/healthz" if kind == "ranch" else base
    results: dict[tuple[str, int], dict[str, float]] = {}
    with server_process([sys.executable, "-m", "bench.servers", kind, str(port)], health):
        task_id = "fixed" if kind == "bare" else make_task(base, OPERATIONS[2].paths[kind])
        for operation in OPERATIONS:
            params: dict[str, object] = {"id": task_id} if operation.method == "GetTask" else MESSAGE
            for concurrency in (1, 32):
                url = base + operation.paths[kind]
                results[(operation.name, concurrency)] = load(
                    url, rpc(operation.method, params), concurrency, seconds
                )
    return results


def main(argv: list[str] | None = None) -> str:
    seconds = float(argv[0]) if argv else 3.0
    results = {kind: measure(kind, seconds) for kind in KINDS}
    rows = []
    for operation in OPERATIONS:
        for concurrency in (1, 32):
            key = (operation.name, concurrency)
            sdk, bare = results["sdk"][key]["rps"], results["bare"][key]["rps"]
            for kind in KINDS:
                row = results[kind][key]
                rate = row["events_per_s"] if operation.method == "SendStreamingMessage" else row["rps"]
                rows.append(
                    [
                        operation.name,
                        concurrency,
                        LABELS[kind],
                        f"{rate:,.0f}",
                        f"{row['p50_ms']:.2f}",
                        f"{row['p99_ms']:.2f}",
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
        "errors",
        "vs a2a-sdk",
        "vs bare",
    ]
    note = f"Echo agent, one uvicorn worker per server, {seconds:g} s per row, load from a separate process."
    section = table("Wire", header, rows, note)
    print(section)
    return section


if __name__ == "__main__":
    main(sys.argv[1:])
