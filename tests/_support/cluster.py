"""`make cluster` as a test runs it: scripts/cluster.py with replicas and HAProxy on free ports.

HAProxy comes from Debian's packages (`make haproxy`, which `make test` runs): a test that needs
it and cannot find it fails, saying so.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from _support import TESTS
from _support.hubkit import ADMIN_KEY
from _support.servers import free_port

SCRIPT = TESTS.parent / "scripts" / "cluster.py"
REDIS = "redis://127.0.0.1:6379/0"
READY = 90.0
"""Seconds three replicas and HAProxy may take to start on a loaded machine."""


@dataclass
class Replica:
    url: str
    pid: int

    def kill(self) -> None:
        """kill -9: no goodbye, no clean shutdown."""
        os.kill(self.pid, signal.SIGKILL)


@dataclass
class Cluster:
    url: str
    """HAProxy's: what clients use."""
    replicas: list[Replica]
    logs: Path


@contextlib.contextmanager
def running_cluster(
    config: str,
    database_url: str,
    logs: Path,
    *,
    replicas: int = 3,
    lease: float = 2.0,
    options: Sequence[str] = (),
    serve: Sequence[str] = (),
) -> Iterator[Cluster]:
    """The cluster `make cluster` starts, serving `config` on `database_url` (PostgreSQL);
    `options` are scripts/cluster.py's own, `serve` are given to every `ranch serve`."""
    if shutil.which("haproxy") is None and not Path("/usr/sbin/haproxy").exists():
        pytest.fail("this test needs HAProxy (Debian's package; `make haproxy` installs it)")
    logs.mkdir(parents=True, exist_ok=True)
    (logs / "team.yaml").write_text(config)
    ports = [free_port() for _ in range(replicas + 1)]
    command = [sys.executable, str(SCRIPT), str(logs / "team.yaml"), "--port", str(ports[0])]
    command += ["--replica-ports", ",".join(map(str, ports[1:])), "--db", database_url]
    command += ["--redis-url", REDIS, "--redis-prefix", f"ranch-test-{uuid.uuid4().hex[:8]}"]
    command += ["--lease", str(lease), "--logs", str(logs), *options]
    if serve:
        command += ["--", *serve]
    env = {**os.environ, "PYTHONPATH": str(TESTS), "RANCH_ADMIN_KEY": ADMIN_KEY}
    out = (logs / "cluster.out").open("wb")
    process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield _ready(process, logs / "cluster.out", replicas)
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        out.close()


def _ready(process: subprocess.Popen[bytes], out: Path, replicas: int) -> Cluster:
    deadline = time.monotonic() + READY
    while time.monotonic() < deadline:
        text = out.read_text(errors="replace")
        if process.poll() is not None:
            raise AssertionError(f"the cluster did not start (exit {process.returncode}):\n{text}")
        if "Ctrl-C stops them all" in text:
            url = re.search(r"ranch cluster: (http://\S+)", text)
            found = re.findall(r"replica-\d+: (http://\S+)\s+pid (\d+)", text)
            assert url is not None and len(found) == replicas, text
            return Cluster(url.group(1), [Replica(u, int(pid)) for u, pid in found], out.parent)
        time.sleep(0.1)
    raise AssertionError(f"the cluster did not start within {READY:.0f} s:\n{out.read_text()}")
