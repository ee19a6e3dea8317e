"""What every benchmark shares: loopback ports, server processes, percentiles, tables.

Servers run in their own processes and bind 127.0.0.1 only; every load loop is
bounded in count and time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import httpx

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def server_process(
    command: Sequence[str],
    health_url: str,
    timeout: float = 30.0,
    quiet: bool = False,
    cpus: set[int] | None = None,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """Run `command` (a server bound to 127.0.0.1) until the block ends; wait until `health_url` answers.

    `quiet` drops the server's stdout (its banner), so a benchmark's own output stays a clean table;
    `cpus` pins the server to those cores (see `SERVER_CPUS`); `env` adds environment variables;
    `log` is a file for the server's stderr (its log and access log), as a deployment keeps it.
    """
    path = os.pathsep.join([str(ROOT), str(ROOT / "src"), str(ROOT / "tests")])
    environment = {**os.environ, "PYTHONPATH": path, **(env or {})}
    stdout = subprocess.DEVNULL if quiet else None
    with contextlib.ExitStack() as files:
        stderr = files.enter_context(log.open("ab")) if log is not None else None
        process = subprocess.Popen(
            list(command),
            env=environment,
            cwd=ROOT,
            stdout=stdout,
            stderr=stderr,
            preexec_fn=pinned(cpus),
        )
        try:
            _wait_healthy(process, command, health_url, timeout)
            yield process
        finally:
            stop(process)


def stop(process: subprocess.Popen[bytes] | subprocess.Popen[str]) -> None:
    """Ask a child to stop; kill it when it has not within 10 s."""
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()


def _wait_healthy(
    process: subprocess.Popen[bytes], command: Sequence[str], health_url: str, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise SystemExit(f"server exited early: {' '.join(command)}")
        try:
            if httpx.get(health_url, timeout=1).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"server did not come up: {' '.join(command)}")
        time.sleep(0.1)


def _split_cores() -> tuple[set[int] | None, set[int] | None]:
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cores) < 2:
        return None, None
    return {cores[0]}, set(cores[1:])


SERVER_CPUS, LOAD_CPUS = _split_cores()
"""One core for the server under test, the others for the load: the two never take turns on one
core, which made runs on 2 cores differ by a third from one to the next."""


def pinned(cpus: set[int] | None) -> Callable[[], None] | None:
    """A `preexec_fn` that pins the child process to `cpus` (None: no pinning)."""
    if cpus is None:
        return None
    return lambda: os.sched_setaffinity(0, cpus)


CGROUP_V2 = Path("/sys/fs/cgroup")
CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")
PERIOD_US = 100_000


@contextlib.contextmanager
def cpu_budget(pid: int, cores: float | None) -> Iterator[str]:
    """Hold the process `pid` to `cores` of CPU time (a CFS quota in a cgroup of its own), as a
    container's CPU limit does: replicas on one small host then measure what each would do on a
    machine of that size, rather than the host's cores they share. Yields what was applied, for the
    table ("not limited" when `cores` is None or no cgroup can be written here: needs root)."""
    if cores is None:
        yield "not limited"
        return
    quota = max(1000, int(cores * PERIOD_US))
    name = f"ranch-bench-{os.getpid()}-{pid}"
    if (CGROUP_V2 / "cgroup.controllers").exists() and "cpu" in (
        CGROUP_V2 / "cgroup.subtree_control"
    ).read_text():
        group, files = CGROUP_V2 / name, {"cpu.max": f"{quota} {PERIOD_US}"}
    else:
        group, files = (
            CGROUP_V1_CPU / name,
            {"cpu.cfs_period_us": str(PERIOD_US), "cpu.cfs_quota_us": str(quota)},
        )
    try:
        group.mkdir()
        for file, value in files.items():
            (group / file).write_text(value)
        (group / "cgroup.procs").write_text(str(pid))
    except OSError as exc:
        refused: OSError | None = exc
    else:
        refused = None
    if refused is not None:
        print(f"  no CPU budget ({group}: {refused}): not limited", file=sys.stderr)
        with contextlib.suppress(OSError):
            group.rmdir()
        yield "not limited (no writable cgroup)"
        return
    try:
        yield f"{cores:g} core each (a CFS quota)"
    finally:
        root = group.parent / "cgroup.procs"
        with contextlib.suppress(OSError):
            root.write_text(str(pid))  # back out, so the group can go (a stopped process has left it)
        with contextlib.suppress(OSError):
            group.rmdir()


def load_run(command: list[str], seconds: float) -> dict[str, float]:
    """A load process pinned to the load cores, run to its end: the JSON summary it prints."""
    pin, limit = pinned(LOAD_CPUS), seconds + 60
    done = subprocess.run(command, capture_output=True, text=True, check=True, timeout=limit, preexec_fn=pin)
    return dict(json.loads(done.stdout))


def ranch_serve(config: Path, port: int, database: Path, *flags: str, quiet_log: bool = True) -> list[str]:
    """The command that serves `config` with ranch, as users run it, rate limits off.

    The load comes from one address far faster than the default caller limit (50/s) allows:
    the benchmarks measure the server, not the policy that would refuse them. `quiet_log` adds
    `--log-level warning` (no access log); the wire benchmark runs `ranch serve`'s defaults.
    """
    return [
        sys.executable, "-m", "ranch", "serve", str(config),
        "--port", str(port), "--db", f"sqlite+aiosqlite:///{database}",
        "--caller-rate", "off", "--agent-rate", "off",
        *(("--log-level", "warning") if quiet_log else ()), *flags,
    ]  # fmt: skip


def percentile(values: Sequence[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(round(fraction * len(ordered))) - 1))]


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]], note: str = "") -> str:
    lines = [f"### {title}", ""]
    if note:
        lines += [note, ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "---|" * len(header))
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    """Resident memory of a process, from /proc (Linux); `field="VmHWM"` gives its peak so far."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def raise_open_files(wanted: int) -> int:
    """Raise this process's soft open-file limit toward `wanted`, never past the hard limit.

    Servers started afterwards inherit it. Returns the soft limit now in force.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft


# -- raw HTTP/1.1 over asyncio streams: far cheaper per connection than httpx at 1000 connections --

A2A_HEADERS = {"A2A-Version": "1.0"}


def jsonrpc_post(path: str, method: str, params: object, request_id: int | str = 1) -> bytes:
    """One keep-alive HTTP/1.1 POST of a JSON-RPC request to 127.0.0.1, as A2A 1.0."""
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}).encode()
    return http_post(path, body, A2A_HEADERS)


def http_post(path: str, body: bytes, headers: Mapping[str, str] | None = None) -> bytes:
    extra = "".join(f"{key}: {value}\r\n" for key, value in (headers or {}).items())
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
        f"{extra}Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """The status code and headers (names lower-cased) of one response."""
    lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers


async def read_chunk(reader: asyncio.StreamReader) -> bytes:
    """One chunk of a chunked body; b"" for the last one (trailers are skipped)."""
    size = int((await reader.readuntil(b"\r\n")).split(b";", 1)[0], 16)
    if size == 0:
        while await reader.readuntil(b"\r\n") != b"\r\n":
            pass
        return b""
    data = await reader.readexactly(size + 2)
    return data[:-2]


async def read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    """The whole body of a response whose head `read_head` returned (Content-Length or chunked)."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        parts: list[bytes] = []
        while chunk := await read_chunk(reader):
            parts.append(chunk)
        return b"".join(parts)
    return await reader.readexactly(int(headers.get("content-length", "0")))


def wake_cost_us(count: int = 300) -> tuple[float, float]:
    """CPU in µs of one event-loop wake after 1 ms idle, and of one busy loop turn, in this process.

    A server waiting on its database (1 ms away) wakes from idle for each answer; a saturated one
    never idles. On a host where waking costs much more than a turn (a virtual machine's idle vCPU),
    the first's CPU per request rises with no change to its code: read "CPU vs SendMessage" beside it."""

    async def measure() -> tuple[float, float]:
        begin = time.process_time()
        for _ in range(count):
            await asyncio.sleep(0.001)
        idle = (time.process_time() - begin) / count
        begin = time.process_time()
        for _ in range(count * 20):
            await asyncio.sleep(0)
        return idle * 1e6, (time.process_time() - begin) / (count * 20) * 1e6

    return asyncio.run(measure())


def host_load() -> float:
    """The host's 1-minute load average: beside a table, it tells a quiet run from one that shared
    the cores with other work."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
