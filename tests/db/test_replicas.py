"""Who is alive: a replica on this host whose process was killed is gone at once, even while its
parent has not reaped it yet (a zombie never beats again), without waiting for the lease."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio

from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.db.replicas import Replicas


def test_a_killed_replica_is_gone_before_its_parent_reaps_it(tmp_path: Path) -> None:
    engine = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'r.db'}")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    def kill_the_child() -> None:
        child.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 5
        while _state(child.pid) != "Z":  # killed, not reaped: a zombie
            assert time.monotonic() < deadline, "the child never became a zombie"
            time.sleep(0.01)

    async def scenario() -> None:
        await migrate.upgrade(engine)
        other = Replicas(engine, lease=600)  # a long lease: only the process check can tell
        other.pid, other.id = child.pid, "other"
        await other.beat()
        me = Replicas(engine, lease=600)
        assert "other" in await me.alive()
        await anyio.to_thread.run_sync(kill_the_child)
        assert "other" not in await me.alive()
        await engine.dispose()

    try:
        anyio.run(scenario)
    finally:
        child.kill()
        child.wait()


def _state(pid: int) -> str:
    """The process state letter in /proc/PID/stat (after the command name's closing parenthesis)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
