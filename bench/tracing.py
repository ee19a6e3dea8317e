"""`python -m bench.tracing [SECONDS] [ROUNDS]`: what tracing costs, off and on, side by side.
`python -m bench.tracing post [COUNT]`: what one export costs the server, through httpx and through
ranch's h11 connection (`observe.collector`), side by side.

Two `ranch serve` servers, started as users start them (access log on, rate limits off), one with
no `OTEL_*` variables (tracing off, the default) and one exporting every span over OTLP/HTTP with
the batch processor to a receiver on 127.0.0.1 (bench/otlp.py): SendMessage to an echo agent at
c=32, and a team turn of 3 hops (two rules agents: desk -> helper -> desk) at c=8.

Two measurements, in one run:
- one server at a time, alone on the server's core, the two taking turns round after round: the
  rows' req/s, latency and CPU (the median of each row's samples);
- side by side: both servers on the server's core at once, each under its own load (c/2 each): the
  kernel shares the core between them by CPU time, so the ratio of their req/s is the ratio of
  what a request costs each, and whatever slows the machine meanwhile slows both alike. A round's
  ratio varies by about +-0.02 where one-at-a-time samples vary by +-0.1 on a shared host.

Targets (docs/observability.md): off within noise of the code before tracing existed (see
bench/README for that A/B), on at most 15 % slower than off (the side-by-side ratio >= 0.85).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.common import SERVER_CPUS, cpu_seconds, free_port, median, ranch_serve, server_process, table
from bench.otlp import receiving
from bench.wire import HEADERS, MESSAGE, load, rpc

CONFIG = """
agents:
  - {id: echo, kind: echo}
  - id: desk
    kind: rules
    rules:
      - {match: "^done", reply: "all done: {text}", route: user, reason: finished}
      - {reply: "please look: {text}", route: helper, reason: needs the helper}
  - id: helper
    kind: rules
    rules: [{reply: "done {text}", route: desk, reason: back to the desk}]
teams:
  - {id: office, members: [desk, helper], default_agent: desk, history_length: 0}
"""
OPERATIONS = (("SendMessage to echo", "echo", 32), ("team turn, 3 hops", "office", 8))


def main(argv: list[str] | None = None) -> str:
    argv = argv or []
    seconds = float(argv[0]) if argv else 3.0
    rounds = int(argv[1]) if len(argv) > 1 else 3
    samples: dict[tuple[str, str], list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ranch-tracing-")))
        receiver = stack.enter_context(receiving(decode=False))  # decoded after the run
        (folder / "bench.yaml").write_text(CONFIG)
        servers = {}
        for name, env in (
            ("off", {}),
            ("on", {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "bench"}),
        ):
            port = free_port()
            command = ranch_serve(folder / "bench.yaml", port, folder / f"{name}.db", quiet_log=False)
            log = folder / f"{name}.log"
            process = stack.enter_context(
                server_process(
                    command,
                    f"http://127.0.0.1:{port}/healthz",
                    quiet=True,
                    cpus=SERVER_CPUS,
                    env=env,
                    log=log,
                )
            )
            servers[name] = (f"http://127.0.0.1:{port}", process.pid)
        for turn in range(rounds):
            order = list(servers.items())
            for name, (base, pid) in order[turn % 2 :] + order[: turn % 2]:
                for label, agent, concurrency in OPERATIONS:
                    before = cpu_seconds(pid)
                    row = load(f"{base}/a2a/agents/{agent}", rpc("SendMessage", MESSAGE), concurrency,
                               seconds, HEADERS)  # fmt: skip
                    row["cpu_us"] = (cpu_seconds(pid) - before) / max(1.0, row["requests"]) * 1e6
                    samples.setdefault((label, name), []).append(row)
        paired = {label: side_by_side(servers, agent, concurrency, seconds, rounds)
                  for label, agent, concurrency in OPERATIONS}  # fmt: skip
        exported = len(receiver.spans())
    rows = []
    for label, _, concurrency in OPERATIONS:
        off = median([row["rps"] for row in samples[(label, "off")]])
        for name in ("off", "on"):
            taken = samples[(label, name)]
            rps = median([row["rps"] for row in taken])
            p99 = median([row["p99_ms"] for row in taken])
            cpu = median([row["cpu_us"] for row in taken])
            errors = int(sum(row["errors"] for row in taken))
            rows.append([label, concurrency, f"tracing {name}", f"{rps:,.0f}", f"{p99:.2f}", f"{cpu:.0f}",
                         errors, f"{rps / off:.2f}x"])  # fmt: skip
    note = (
        f"`ranch serve` (access log on, rate limits off); tracing on: OTLP/HTTP batch export to a local "
        f"receiver, which took {exported:,} spans. Medians of {rounds} samples of {seconds:g} s, the two "
        "servers taking turns. Target: on >= 0.85x off."
    )
    section = table(
        "Tracing, off and on",
        ["operation", "c", "server", "req/s", "p99 ms", "server CPU µs/req", "errors", "vs off"],
        rows,
        note,
    )
    pairs = [
        [label, concurrency, f"{median(ratios):.2f}x", f"{min(ratios):.2f}-{max(ratios):.2f}x", errors]
        for (label, _, concurrency), (ratios, errors) in zip(OPERATIONS, paired.values(), strict=True)
    ]
    section += "\n" + table(
        "Tracing, side by side",
        ["operation", "c (both servers)", "on/off req/s, median", "rounds' range", "errors"],
        pairs,
        f"Both servers on one core at once, each loaded at c/2, {rounds} rounds of {seconds:g} s: the "
        "ratio of their req/s is the ratio of a request's cost. Target: on >= 0.85x off.",
    )
    print(section, flush=True)
    return section


def side_by_side(
    servers: dict[str, tuple[str, int]], agent: str, concurrency: int, seconds: float, rounds: int
) -> tuple[list[float], int]:
    """Each round: both servers loaded at once (c/2 each), on their shared core; on's req/s / off's
    for each round, and the errors of all rounds."""
    body = rpc("SendMessage", MESSAGE)
    ratios, errors = [], 0
    for _ in range(rounds + 1):
        rows: dict[str, dict[str, float]] = {}
        threads = [
            threading.Thread(
                target=_drive, args=(f"{base}/a2a/agents/{agent}", body, concurrency, seconds, rows, name)
            )
            for name, (base, _pid) in servers.items()
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ratios.append(rows["on"]["rps"] / max(rows["off"]["rps"], 1.0))
        errors += int(rows["on"]["errors"] + rows["off"]["errors"])
    return ratios[1:], errors  # (the first round's ratio is left out: it warms both up)


def _drive(url: str, body: dict[str, object], concurrency: int, seconds: float,
           into: dict[str, dict[str, float]], name: str) -> None:  # fmt: skip
    into[name] = load(url, body, max(1, concurrency // 2), seconds, HEADERS)


def posts(count: int = 300, rounds: int = 5) -> str:
    """CPU of the exporting thread per POST of a 512-span batch (150 KB) to a local receiver, over
    one kept-alive connection: httpx's AsyncClient (as the exporter once sent) and `Collector`,
    taking turns round after round."""
    import asyncio
    import time

    import httpx

    from ranch.observe.collector import Collector

    body = b"\x0a" * 150_000
    headers = {"Content-Type": "application/x-protobuf"}

    async def measure(url: str) -> dict[str, list[float]]:
        client = httpx.AsyncClient(trust_env=False)
        collector = Collector(url, headers, timeout=10)
        clients: dict[str, Callable[[], Awaitable[object]]] = {
            "httpx.AsyncClient": lambda: client.post(url, content=body, headers=headers),
            "h11 (observe.collector)": lambda: collector.post(body),
        }
        taken: dict[str, list[float]] = {name: [] for name in clients}
        for _ in range(rounds):
            for name, post in clients.items():
                started = time.thread_time()
                for _ in range(count):
                    await post()
                taken[name].append((time.thread_time() - started) / count * 1e6)
        await client.aclose()
        collector.close()
        return taken

    with receiving(decode=False) as receiver:
        taken = asyncio.run(measure(receiver.endpoint + "/v1/traces"))
    first = median(taken["httpx.AsyncClient"])
    rows = [[name, f"{median(values):.0f}", f"{median(values) / 512:.2f}", f"{median(values) / first:.2f}x"]
            for name, values in taken.items()]  # fmt: skip
    section = table(
        "Tracing: one export's cost",
        ["client", "CPU µs per POST", "µs per span (512 a batch)", "vs httpx"],
        rows,
        f"POST of 150 KB to a local OTLP receiver over a kept-alive connection; medians of {rounds} "
        f"rounds of {count}, the clients taking turns; CPU of the exporting thread.",
    )
    print(section, flush=True)
    return section


if __name__ == "__main__":
    if sys.argv[1:2] == ["post"]:
        posts(*(int(arg) for arg in sys.argv[2:3]))
    else:
        main(sys.argv[1:])
