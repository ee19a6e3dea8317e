"""`python -m bench.tracing [SECONDS] [ROUNDS]`: what tracing through the OpenTelemetry SDK costs, off,
on for every span (`always_on`), and sampled (`parentbased_traceidratio` at 0.1), side by side.

Three `ranch serve` servers, started as users start them (access log on, rate limits off): one with
no `OTEL_*` variables (tracing off, the default), two exporting over OTLP/HTTP with the SDK's batch
processor to a receiver on 127.0.0.1 (bench/otlp.py), one recording every span, one a tenth of the
traces. Two operations: SendMessage to an echo agent at c=32 (ranch's own cost per request, nothing
else: the worst case for tracing), and a team turn of 3 hops at c=8 whose members each work 1 ms
(`Worker`: CPU, in the server's process), the smallest work a member calling a model does.

Two measurements, in one run:
- one server at a time, alone on the server's core, taking turns round after round: the rows'
  req/s, latency and CPU (the median of each row's samples);
- side by side: a traced server and the off one on the server's core at once, each under its own
  load (c/2 each): the kernel shares the core between them by CPU time, so the ratio of their req/s
  is the ratio of what a request costs each, and whatever slows the machine slows both alike.

The rule (README "Development"): a library is replaced only when a benchmark of work users run shows
it is the bottleneck. Here: if a team turn traced with the 0.1 sampler ran more than 15 % slower than
off, a faster tracer could be considered (opt-in only); bench/README.md ("Tracing") keeps the figures.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import threading
import time
from collections.abc import AsyncGenerator
from pathlib import Path

from a2a.types import Message

from bench.common import SERVER_CPUS, cpu_seconds, free_port, median, ranch_serve, server_process, table
from bench.otlp import receiving
from bench.wire import HEADERS, MESSAGE, load, rpc
from ranch import Call, Event, RoutingDecision, reply, text_of

WORK_S = 0.001
"""CPU each member's hop works, in the server's process."""

CONFIG = """
agents:
  - {id: echo, kind: echo}
  - {id: desk, kind: python, entry: "bench.tracing:Worker", client_routing: true, options: {then: helper}}
  - {id: helper, kind: python, entry: "bench.tracing:Worker", client_routing: true, options: {then: desk}}
teams:
  - {id: office, members: [desk, helper], default_agent: desk, history_length: 0}
"""
OPERATIONS = (("SendMessage to echo", "echo", 32), ("team turn, 3 hops of 1 ms", "office", 8))
SAMPLERS = {
    "tracing off": None,
    "always_on": {"OTEL_TRACES_SAMPLER": "parentbased_always_on"},
    "parentbased_traceidratio 0.1": {
        "OTEL_TRACES_SAMPLER": "parentbased_traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.1",
    },
}


class Worker:
    """A member that works `WORK_S` of CPU, then routes: desk -> helper -> desk -> user."""

    def __init__(self, agent_id: str, then: str) -> None:
        self.agent_id = agent_id
        self.then = then

    async def run(self, message: Message, _call: Call) -> AsyncGenerator[Event | str, None]:
        until = time.perf_counter() + WORK_S
        while time.perf_counter() < until:
            pass
        text = text_of(message)
        if self.then == "helper" and text.startswith("done"):
            answer, decision = f"all done: {text}", RoutingDecision(recipient="user", reason="finished")
        elif self.then == "helper":
            answer, decision = (
                f"please look: {text}",
                RoutingDecision(recipient="helper", reason="help"),
            )
        else:
            answer, decision = f"done {text}", RoutingDecision(recipient="desk", reason="back to the desk")
        yield reply(message, answer, decision)


def main(argv: list[str] | None = None) -> str:
    argv = argv or []
    seconds = float(argv[0]) if argv else 3.0
    rounds = int(argv[1]) if len(argv) > 1 else 3
    samples: dict[tuple[str, str], list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ranch-tracing-")))
        receiver = stack.enter_context(receiving(decode=False))  # decoded after the run
        (folder / "bench.yaml").write_text(CONFIG)
        servers: dict[str, tuple[str, int]] = {}
        for index, (name, sampler) in enumerate(SAMPLERS.items()):
            env = {} if sampler is None else {
                "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint, "OTEL_SERVICE_NAME": "bench", **sampler
            }  # fmt: skip
            port = free_port()
            command = ranch_serve(folder / "bench.yaml", port, folder / f"{index}.db", quiet_log=False)
            process = stack.enter_context(
                server_process(
                    command,
                    f"http://127.0.0.1:{port}/healthz",
                    quiet=True,
                    cpus=SERVER_CPUS,
                    env=env,
                    log=folder / f"{index}.log",
                )
            )
            servers[name] = (f"http://127.0.0.1:{port}", process.pid)
        for turn in range(rounds):
            order = list(servers.items())
            for name, (base, pid) in order[turn % 3 :] + order[: turn % 3]:
                for label, agent, concurrency in OPERATIONS:
                    before = cpu_seconds(pid)
                    row = load(f"{base}/a2a/agents/{agent}", rpc("SendMessage", MESSAGE), concurrency,
                               seconds, HEADERS)  # fmt: skip
                    row["cpu_us"] = (cpu_seconds(pid) - before) / max(1.0, row["requests"]) * 1e6
                    samples.setdefault((label, name), []).append(row)
        plain = servers["tracing off"]
        paired = {
            (label, name): side_by_side(plain, servers[name], agent, concurrency, seconds, rounds)
            for label, agent, concurrency in OPERATIONS
            for name in list(SAMPLERS)[1:]
        }
        exported = len(receiver.spans())
    rows = []
    for label, _, concurrency in OPERATIONS:
        off = median([row["rps"] for row in samples[(label, "tracing off")]])
        for name in SAMPLERS:
            taken = samples[(label, name)]
            rps = median([row["rps"] for row in taken])
            p99 = median([row["p99_ms"] for row in taken])
            cpu = median([row["cpu_us"] for row in taken])
            errors = int(sum(row["errors"] for row in taken))
            rows.append([label, concurrency, name, f"{rps:,.0f}", f"{p99:.2f}", f"{cpu:.0f}", errors,
                         f"{rps / off:.2f}x"])  # fmt: skip
    note = (
        f"`ranch serve` (access log on, rate limits off); traced: the OpenTelemetry SDK, OTLP/HTTP batch "
        f"export to a local receiver, which took {exported:,} spans. Medians of {rounds} samples of "
        f"{seconds:g} s, the servers taking turns."
    )
    section = table(
        "Tracing, off and on",
        ["operation", "c", "server", "req/s", "p99 ms", "server CPU µs/req", "errors", "vs off"],
        rows,
        note,
    )
    pairs = [
        [label, name, concurrency, f"{median(ratios):.2f}x", f"{min(ratios):.2f}-{max(ratios):.2f}x", errors]
        for ((label, name), (ratios, errors)), concurrency in zip(
            paired.items(), [c for _, _, c in OPERATIONS for _ in list(SAMPLERS)[1:]], strict=True
        )
    ]
    section += "\n" + table(
        "Tracing, side by side",
        ["operation", "sampler", "c (both servers)", "traced/off req/s, median", "rounds' range", "errors"],
        pairs,
        f"A traced server and the off one on one core at once, each loaded at c/2, {rounds} rounds of "
        f"{seconds:g} s: the ratio of their req/s is the ratio of a request's cost.",
    )
    print(section, flush=True)
    return section


def side_by_side(
    off: tuple[str, int], traced: tuple[str, int], agent: str, concurrency: int, seconds: float, rounds: int
) -> tuple[list[float], int]:
    """Each round: both servers loaded at once (c/2 each), on their shared core; traced's req/s / off's
    for each round, and the errors of all rounds."""
    body = rpc("SendMessage", MESSAGE)
    ratios, errors = [], 0
    for _ in range(rounds + 1):
        rows: dict[str, dict[str, float]] = {}
        threads = [
            threading.Thread(
                target=_drive, args=(f"{base}/a2a/agents/{agent}", body, concurrency, seconds, rows, name)
            )
            for name, (base, _pid) in (("off", off), ("traced", traced))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        ratios.append(rows["traced"]["rps"] / max(rows["off"]["rps"], 1.0))
        errors += int(rows["traced"]["errors"] + rows["off"]["errors"])
    return ratios[1:], errors  # (the first round's ratio is left out: it warms both up)


def _drive(url: str, body: dict[str, object], concurrency: int, seconds: float,
           into: dict[str, dict[str, float]], name: str) -> None:  # fmt: skip
    into[name] = load(url, body, max(1, concurrency // 2), seconds, HEADERS)


if __name__ == "__main__":
    main(sys.argv[1:])
