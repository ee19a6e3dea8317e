"""`python -m bench` (or `make bench`): SendMessage to an echo agent, ranch vs a2a-sdk vs bare.

Each server runs in its own process (one uvicorn worker); the load comes from a
separate process (bench/load.py). Prints a table with ratios measured in this run.
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time

import httpx

ROWS = ("ranch", "sdk", "bare")
LABELS = {"ranch": "ranch", "sdk": "a2a-sdk DefaultRequestHandler", "bare": "bare Starlette (fixed body)"}
PATHS = {"ranch": "/a2a/agents/echo", "sdk": "/", "bare": "/"}
BODY = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "SendMessage",
    "params": {"message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "hello"}]}},
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(url: str, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            httpx.post(url, json=BODY, headers={"A2A-Version": "1.0"}, timeout=2).raise_for_status()
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"server at {url} did not come up")


def measure(kind: str, concurrency: int, seconds: float, body_file: str) -> dict[str, float]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "bench.servers", kind, str(port)])
    try:
        url = f"http://127.0.0.1:{port}{PATHS[kind]}"
        wait_ready(url)
        command = [sys.executable, "-m", "bench.load", url, body_file, "--concurrency", str(concurrency)]
        command += ["--seconds", str(seconds), "--header", "A2A-Version:1.0"]
        output = subprocess.run(command, capture_output=True, text=True, check=True, timeout=seconds + 60)
        return dict(json.loads(output.stdout))
    finally:
        server.terminate()
        server.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=4.0, help="load per row")
    args = parser.parse_args()
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(BODY, handle)
    results = {(kind, c): measure(kind, c, args.seconds, handle.name) for c in (1, 32) for kind in ROWS}
    print(f"\nSendMessage, echo agent, one uvicorn worker, {args.seconds:g} s per row\n")
    print("| server | c | req/s | p50 ms | p99 ms | errors | vs a2a-sdk | vs bare |")
    print("|---|---|---|---|---|---|---|---|")
    for c in (1, 32):
        for kind in ROWS:
            row = results[(kind, c)]
            sdk, bare = results[("sdk", c)]["rps"], results[("bare", c)]["rps"]
            print(
                f"| {LABELS[kind]} | {c} | {row['rps']:.0f} | {row['p50_ms']:.2f} | {row['p99_ms']:.2f} | "
                f"{row['errors']:.0f} | {row['rps'] / sdk:.2f}x | {row['rps'] / bare:.2f}x |"
            )


if __name__ == "__main__":
    main()
