"""A bounded asyncio load generator over raw keep-alive HTTP/1.1 connections.

It runs in its own process (`python -m bench.load URL BODY_FILE --concurrency C
--seconds S`) so the load does not share the server's event loop, and prints one
JSON line: requests, errors, requests/s, SSE events/s, p50 and p99 in ms. It only
targets 127.0.0.1 and stops after `--seconds` or `--max-requests`, whichever first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from urllib.parse import urlsplit


async def worker(
    port: int,
    request: bytes,
    deadline: float,
    budget: list[int],
    latencies: list[float],
    counts: dict[str, int],
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        while time.perf_counter() < deadline and budget[0] > 0:
            budget[0] -= 1
            started = time.perf_counter()
            writer.write(request)
            status, body = await read_response(reader)
            latencies.append(time.perf_counter() - started)
            counts["events"] += body.count(b"data:")
            if status != 200 or b'"error"' in body:
                counts["errors"] += 1
    finally:
        writer.close()


async def read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """One HTTP/1.1 response: its status and body (Content-Length, or chunked as SSE streams are)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length, chunked = 0, False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            length = int(value)
        elif name.lower() == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if not chunked:
        return status, await reader.readexactly(length) if length else b""
    body = bytearray()
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            return status, bytes(body)
        body += chunk[:-2]


async def run(
    url: str, body: bytes, headers: dict[str, str], concurrency: int, seconds: float, cap: int
) -> dict[str, float]:
    parts = urlsplit(url)
    if parts.hostname != "127.0.0.1":
        raise SystemExit("bench.load only targets 127.0.0.1")
    extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    request = (
        f"POST {parts.path or '/'} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"{extra}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    latencies: list[float] = []
    counts = {"errors": 0, "events": 0}
    budget = [cap]
    started = time.perf_counter()
    deadline = started + seconds
    port = parts.port or 80
    await asyncio.gather(
        *(worker(port, request, deadline, budget, latencies, counts) for _ in range(concurrency))
    )
    elapsed = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "errors": counts["errors"],
        "rps": len(ordered) / elapsed,
        "events_per_s": counts["events"] / elapsed,
        "p50_ms": statistics.median(ordered) * 1000 if ordered else 0.0,
        "p99_ms": ordered[max(0, int(len(ordered) * 0.99) - 1)] * 1000 if ordered else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("body_file")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--max-requests", type=int, default=200_000)
    parser.add_argument("--header", action="append", default=[])
    args = parser.parse_args()
    headers = dict(h.split(":", 1) for h in args.header)
    with open(args.body_file, "rb") as handle:
        body = handle.read()
    result = asyncio.run(run(args.url, body, headers, args.concurrency, args.seconds, args.max_requests))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
