"""A worker ends with its parent on systems without Linux's PR_SET_PDEATHSIG too.

`ranch serve --workers N` workers use the kernel's signal on Linux (tests/cli/test_serve_workers.py
kills a real parent); elsewhere a thread watches for the worker being re-parented. This runs that
thread in a real grandchild process, SIGKILLs the process between, and waits for the grandchild
to end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from _support.hubkit import wait_until
from _support.servers import process_running

PARENT = """
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]])
open(sys.argv[3], "w").write(str(child.pid))
child.wait()
"""
WORKER = """
import os, pathlib, sys, time
from ranch.cli import lifeline
lifeline.watch_parent(os.getppid(), poll=0.1)
pathlib.Path(sys.argv[1]).write_text("watching")
time.sleep(120)
"""


def test_the_watching_thread_ends_a_worker_whose_parent_was_killed(tmp_path: Path) -> None:
    if not Path("/proc/self/stat").exists():
        raise AssertionError("this test reads /proc to see the worker: Linux only")
    watching, pid_file = tmp_path / "watching", tmp_path / "worker.pid"
    command = [sys.executable, "-c", PARENT, WORKER, str(watching), str(pid_file)]
    parent = subprocess.Popen(command, stdin=subprocess.DEVNULL)
    worker = 0
    try:
        wait_until(lambda: watching.exists() and pid_file.read_text(), timeout=30, what="the worker watching")
        worker = int(pid_file.read_text())
        assert process_running(worker)
        parent.kill()
        parent.wait(10)
        wait_until(
            lambda: not process_running(worker), timeout=10, what=f"worker {worker} to end after its parent"
        )
    finally:
        parent.kill()
        parent.wait(10)
        if worker and process_running(worker):
            with contextlib.suppress(OSError):
                os.kill(worker, signal.SIGKILL)
