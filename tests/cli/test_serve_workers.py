"""`ranch serve --workers N`: N processes on one database and one Redis, serving as one server.

A task started on one connection is read back on fresh connections, whichever worker takes each;
both workers started (their start-up lines), the admin key was made once. Without `--redis-url`
the command refuses, saying why. When the parent is killed outright (SIGKILL, an OOM kill), its
workers end too and free the port, so a supervisor's restart can bind it. Redis (127.0.0.1:6379)
and, for the PostgreSQL run, PostgreSQL are needed; without them these tests fail, saying so.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import httpx

from _support.hubkit import wait_until
from _support.servers import HOST, ServerProcess, free_port, process_running

REDIS = "redis://127.0.0.1:6379/0"
CONFIG = """
agents:
  - id: reader
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 0.3}
"""
TESTS = Path(__file__).resolve().parent.parent


def workers_of(output: str) -> set[str]:
    """The worker processes uvicorn started, by pid."""
    return set(re.findall(r"Started server process \[(\d+)\]", output))


def ready(output: str) -> bool:
    """Both workers started and finished their start-up."""
    return len(workers_of(output)) == 2 and output.count("Application startup complete") == 2


def rpc(method: str, params: dict[str, object]) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def test_two_workers_serve_one_database_as_one_server_and_end_with_their_parent(
    tmp_path: Path, database_url: str
) -> None:
    if not Path("/proc/self/stat").exists():
        raise AssertionError("this test reads /proc to see the workers: Linux only")
    config = tmp_path / "team.yaml"
    config.write_text(CONFIG)
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--workers", "2"]
    command += [
        "--db",
        database_url,
        "--redis-url",
        REDIS,
        "--redis-prefix",
        f"ranch-test-{uuid.uuid4().hex[:8]}",
    ]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(TESTS)}  # the probe agent lives in the tests
    workers: set[int] = set()
    try:
        with ServerProcess(command, port, env=env, log_path=tmp_path / "serve.log") as server:
            # the first worker answers the health check; the second may still be starting (spawned)
            wait_until(lambda: ready(server.output()), timeout=60, what="both workers started")
            workers = {int(pid) for pid in workers_of(server.output())}
            url, headers = f"{server.url}/a2a/agents/reader", {"A2A-Version": "1.0"}
            message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "read"}]}
            started = httpx.post(
                url,
                json=rpc("SendMessage", {"message": message, "configuration": {"returnImmediately": True}}),
                headers=headers,
                timeout=10,
            ).json()["result"]["task"]
            states = set()
            for _ in range(12):  # a new connection each: the kernel hands them to either worker
                answer = httpx.post(
                    url, json=rpc("GetTask", {"id": started["id"]}), headers=headers, timeout=10
                )
                states.add(answer.json()["result"]["status"]["state"])
            assert states <= {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"}, states
            output = server.output()
            assert len(workers) == 2, output[-2000:]
            assert output.count("created user 'admin'") == 1  # made once, before the workers started

            # killed outright (SIGKILL, an OOM kill): no chance to stop its workers itself
            assert all(process_running(pid) for pid in workers), workers
            server.kill()
            wait_until(
                lambda: not any(process_running(pid) for pid in workers),
                timeout=15,
                what=f"workers {sorted(workers)} to end after their parent was killed",
            )
            # what a supervisor does next, start it again on the same port, can bind it
            wait_until(lambda: port_free(port), timeout=15, what=f"port {port} to be free")
    finally:
        kill_orphans(workers)


def test_workers_without_redis_are_refused_saying_why(tmp_path: Path) -> None:
    command = [
        sys.executable,
        "-m",
        "ranch",
        "serve",
        "--workers",
        "2",
        "--db",
        f"sqlite+aiosqlite:///{tmp_path / 'r.db'}",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode != 0
    assert "--workers 2 needs --redis-url" in done.stderr + done.stdout, done.stderr


def port_free(port: int) -> bool:
    """Nothing listens on 127.0.0.1:`port`: a new server could bind it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind((HOST, port))
        except OSError:
            return False
        return True


def kill_orphans(pids: set[int]) -> None:
    """SIGKILL the workers still running, so a failing run leaves nothing behind."""
    for pid in pids:
        with contextlib.suppress(OSError):
            if process_running(pid) and b"multiprocessing" in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
