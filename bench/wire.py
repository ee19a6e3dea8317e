"""Wire: SendMessage, SendStreamingMessage and GetTask to an echo agent, the servers side by side.

ranch as deployments run it (`ranch serve`, a child process of the real CLI: its defaults,
access log on; the same with `--no-access-log`; `--auth keys` with a key on every call), next
to the a2a-sdk's DefaultRequestHandler serving the same agent, a bare Starlette endpoint
returning a fixed body (the limit for any Python server here), and the official @a2a-js/sdk
echo server (Node). One process each, pinned to one core; load from a separate process
(bench/load.py) at concurrency 1 and 32. Rate limits are off on every ranch server: the load
comes from one address, and the default caller limit (50/s) would refuse it.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common import (
    LOAD_CPUS,
    ROOT,
    SERVER_CPUS,
    cpu_seconds,
    free_port,
    load_run,
    median,
    ranch_serve,
    server_process,
    table,
)
from bench.servers import RANCH_CONFIG

BENCH_KEY = "rk_bench_admin_key_0123456789abcdef"
"""The admin key of the `--auth keys` server (RANCH_ADMIN_KEY), sent with every call to it."""
JS = ROOT / "bench" / "js"
RANCH_PATHS = {
    "SendMessage": "/a2a/agents/echo",
    "SendStreamingMessage": "/a2a/agents/echo",
    "GetTask": "/a2a/agents/tasker",
}


@dataclass(frozen=True)
class Kind:
    """One server compared: how it is started and where each operation goes (None: not served)."""

    name: str
    label: str
    paths: Mapping[str, str | None]
    headers: Mapping[str, str] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    """`ranch serve` flags (ranch kinds only)."""


KINDS = (
    Kind("ranch", "ranch serve (defaults: access log on)", RANCH_PATHS),
    Kind("ranch-no-log", "ranch serve --no-access-log", RANCH_PATHS, flags=("--no-access-log",)),
    Kind(
        "ranch-keys",
        "ranch serve --auth keys (key on every call)",
        RANCH_PATHS,
        headers={"X-API-Key": BENCH_KEY},
        flags=("--auth", "keys"),
    ),
    Kind(
        "sdk",
        "a2a-sdk DefaultRequestHandler",
        {"SendMessage": "/", "SendStreamingMessage": "/", "GetTask": "/task/"},
    ),
    Kind(
        "bare",
        "bare Starlette (fixed body)",
        {"SendMessage": "/", "SendStreamingMessage": "/stream", "GetTask": "/task/"},
    ),
    Kind(
        "js",
        "@a2a-js/sdk DefaultRequestHandler (Node, express)",
        {"SendMessage": "/", "SendStreamingMessage": "/", "GetTask": None},  # its echo makes no task
    ),
)
BY_NAME = {kind.name: kind for kind in KINDS}
OPERATIONS = ("SendMessage", "SendStreamingMessage", "GetTask")
HEADERS = {"A2A-Version": "1.0"}
MESSAGE: dict[str, object] = {
    "message": {"role": "ROLE_USER", "messageId": "m-1", "parts": [{"text": "hello"}]}
}
TARGETS = (
    # (what, numerator kind, denominator kind, at least)
    ("default `ranch serve` vs the same with the access log off", "ranch", "ranch-no-log", 0.9),
    ("`--auth keys` (key on every call) vs without auth", "ranch-keys", "ranch", 0.9),
    ("`--auth keys` and the access log on vs bare Starlette", "ranch-keys", "bare", 0.5),
    ("default `ranch serve` vs @a2a-js/sdk", "ranch", "js", 2.0),
)
"""Each target is a throughput ratio of SendMessage at c=32, both measured in this run."""


def rpc(method: str, params: dict[str, object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def load(
    url: str,
    body: dict[str, object],
    concurrency: int,
    seconds: float,
    headers: Mapping[str, str],
    cap: int | None = None,
) -> dict[str, float]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(body, handle)
    command = [sys.executable, "-m", "bench.load", url, handle.name, "--concurrency", str(concurrency)]
    command += ["--seconds", str(seconds)]
    if cap is not None:
        command += ["--max-requests", str(cap)]
    for name, value in {**HEADERS, **headers}.items():
        command += ["--header", f"{name}:{value}"]
    summary = load_run(command, seconds)
    Path(handle.name).unlink()
    return summary


@dataclass
class Server:
    """One of the servers, running for the whole benchmark."""

    kind: Kind
    base: str
    pid: int
    task_id: str

    def sample(
        self, operation: str, concurrency: int, seconds: float, cap: int | None = None
    ) -> dict[str, float]:
        """One load run (at most `cap` requests), plus the server's CPU time per request over it."""
        params: dict[str, object] = {"id": self.task_id} if operation == "GetTask" else MESSAGE
        path = self.kind.paths[operation]
        assert path is not None
        before = cpu_seconds(self.pid)
        row = load(self.base + path, rpc(operation, params), concurrency, seconds, self.kind.headers, cap)
        row["cpu_us"] = (cpu_seconds(self.pid) - before) / max(1.0, row["requests"]) * 1e6
        return row


def _command(kind: Kind, port: int, folder: Path) -> tuple[list[str], str, dict[str, str]]:
    """The command that starts `kind` on `port`, its health URL and its environment."""
    base = f"http://127.0.0.1:{port}"
    if kind.name.startswith("ranch"):
        config = folder / "bench.yaml"
        config.write_text(RANCH_CONFIG)
        command = ranch_serve(config, port, folder / f"{kind.name}.db", *kind.flags, quiet_log=False)
        return command, f"{base}/healthz", {"RANCH_ADMIN_KEY": BENCH_KEY}
    if kind.name == "js":
        if shutil.which("node") is None or not (JS / "node_modules" / "@a2a-js").is_dir():
            raise SystemExit(
                "the @a2a-js/sdk server is not installed: run `make benchjs` (npm ci in bench/js)"
            )
        return ["node", str(JS / "echo-server.mjs"), str(port)], f"{base}/healthz", {}
    return [sys.executable, "-m", "bench.servers", kind.name, str(port)], base, {}


@contextlib.contextmanager
def serving(
    name: str, folder: Path | None = None, wrap: Sequence[str] = (), timeout: float = 30.0
) -> Iterator[Server]:
    """Server `name` on a free port, its stderr (log, access log) in a file under `folder`;
    `wrap` runs it under another command (`valgrind ...`, which serves SendMessage only)."""
    kind = BY_NAME[name]
    with contextlib.ExitStack() as stack:
        if folder is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ranch-wire-")))
        port = free_port()
        command, health, env = _command(kind, port, folder)
        log = folder / f"{kind.name}.log"
        process = stack.enter_context(
            server_process(
                [*wrap, *command], health, timeout=timeout, quiet=True, cpus=SERVER_CPUS, env=env, log=log
            )
        )
        base = f"http://127.0.0.1:{port}"
        task_id = "fixed" if kind.name in ("bare", "js") or wrap else make_task(base, kind)
        yield Server(kind, base, process.pid, task_id)


def make_task(base: str, kind: Kind) -> str:
    """Create one completed task to read back with GetTask."""
    path = kind.paths["GetTask"]
    assert path is not None
    body = rpc("SendMessage", MESSAGE)
    answer = httpx.post(base + path, json=body, headers={**HEADERS, **kind.headers}, timeout=10).json()
    task_id: str = answer["result"]["task"]["id"]
    return task_id


def measure(seconds: float, rounds: int) -> dict[tuple[str, int, str], dict[str, float]]:
    """Every (operation, concurrency, server) row: `rounds` samples per server, servers taking turns.

    The machine's speed drifts over minutes; interleaving the servers, taking one sample of
    every row per round, and keeping the medians puts the drift into every server's samples alike
    and lets one slow spell spoil one sample of a row, not the row.
    """
    samples: dict[tuple[str, int, str], list[dict[str, float]]] = {}
    with contextlib.ExitStack() as stack:
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ranch-wire-")))
        servers = [stack.enter_context(serving(kind.name, folder)) for kind in KINDS]
        for turn in range(rounds):  # rounds outermost: a slow spell of the machine hits one sample per row
            shift = turn % len(servers)
            for operation in OPERATIONS:
                for concurrency in (1, 32):
                    for server in servers[shift:] + servers[:shift]:
                        if server.kind.paths[operation] is None:
                            continue
                        key = (operation, concurrency, server.kind.name)
                        samples.setdefault(key, []).append(server.sample(operation, concurrency, seconds))
    return {
        key: {
            name: median([row[name] for row in rows])
            for name in ("rps", "events_per_s", "p50_ms", "p99_ms", "cpu_us")
        }
        | {"errors": sum(row["errors"] for row in rows)}
        for key, rows in samples.items()
    }


def _rows(results: dict[tuple[str, int, str], dict[str, float]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for operation in OPERATIONS:
        for concurrency in (1, 32):
            sdk = results[(operation, concurrency, "sdk")]["rps"]
            bare = results[(operation, concurrency, "bare")]["rps"]
            for kind in KINDS:
                row = results.get((operation, concurrency, kind.name))
                if row is None:
                    continue
                rate = row["events_per_s"] if operation == "SendStreamingMessage" else row["rps"]
                rows.append(
                    [
                        operation,
                        concurrency,
                        kind.label,
                        f"{rate:,.0f}",
                        f"{row['p50_ms']:.2f}",
                        f"{row['p99_ms']:.2f}",
                        f"{row['cpu_us']:.0f}",
                        int(row["errors"]),
                        f"{row['rps'] / sdk:.2f}x",
                        f"{row['rps'] / bare:.2f}x",
                    ]  # fmt: skip
                )
    return rows


def _targets(results: dict[tuple[str, int, str], dict[str, float]]) -> list[list[object]]:
    rows: list[list[object]] = []
    for what, over, under, least in TARGETS:
        mine, theirs = results[("SendMessage", 32, over)], results[("SendMessage", 32, under)]
        ratio = mine["rps"] / theirs["rps"]
        cpu = theirs["cpu_us"] / mine["cpu_us"] if mine["cpu_us"] else 0.0
        measured = (
            f"{ratio:.2f}x ({mine['rps']:,.0f} vs {theirs['rps']:,.0f} req/s; CPU per request {cpu:.2f}x)"
        )
        rows.append([what, f">= {least:g}x", measured, "met" if ratio >= least else "not met"])
    return rows


def main(argv: list[str] | None = None) -> str:
    seconds = float(argv[0]) if argv else 2.0
    rounds = int(argv[1]) if argv and len(argv) > 1 else 3
    results = measure(seconds, rounds)
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
        f"Echo agent, one process per server ({pinning}); load from a separate process. ranch runs as "
        "`ranch serve` (rate limits off, its log and access log to a file). Each row is the median of "
        f"{rounds} samples of {seconds:g} s, one per round over all rows, the servers taking turns."
    )
    section = table("Wire", header, _rows(results), note)
    targets_note = (
        "SendMessage at c=32, throughput ratios of two rows of the table above (same run); "
        "*CPU per request* is the inverse ratio of their server CPU µs/req, the steadier figure."
    )
    section += "\n" + table(
        "Wire targets", ["target", "at least", "measured", "met"], _targets(results), targets_note
    )
    print(section)
    return section


if __name__ == "__main__":
    main(sys.argv[1:])
