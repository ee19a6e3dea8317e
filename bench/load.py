"""A bounded asyncio load generator over raw keep-alive HTTP/1.1 connections.

It runs in its own process (`python -m bench.load URL BODY_FILE --concurrency C
--seconds S`) so the load does not share the server's event loop, and prints one
JSON line: requests, errors, requests/s, p50 and p99 in ms. It only ever targets
127.0.0.1, and stops after `--seconds` or `--max-requests`, whichever comes first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from urllib.parse import urlsplit


async def worker(
    host: str,
    port: int,
    request: bytes,
    deadline: float,
    budget: list[int],
    latencies: list[float],
    errors: list[int],
) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.perf_counter() < deadline and budget[0] > 0:
            budget[0] -= 1
            started = time.perf_counter()
            writer.write(request)
            status = await read_response(reader)
            latencies.append(time.perf_counter() - started)
            if status != 200:
                errors[0] += 1
    finally:
        writer.close()


async def read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    if length:
        await reader.readexactly(length)
    return status


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
    errors = [0]
    budget = [cap]
    started = time.perf_counter()
    deadline = started + seconds
    await asyncio.gather(
        *(
            worker("127.0.0.1", parts.port or 80, request, deadline, budget, latencies, errors)
            for _ in range(concurrency)
        )
    )
    elapsed = time.perf_counter() - started
    ordered = sorted(latencies)
    return {
        "requests": len(ordered),
        "errors": errors[0],
        "rps": len(ordered) / elapsed,
        "p50_ms": statistics.median(ordered) * 1000 if ordered else 0.0,
        "p99_ms": ordered[int(len(ordered) * 0.99) - 1] * 1000 if ordered else 0.0,
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
