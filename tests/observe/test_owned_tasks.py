"""Every background task ranch starts has an owner: a hub's whole life (its lifespan, traced team turns
whose member is a team, the access log) leaves no task pending when its event loop is closed without
cancelling anything for it (tests/observe/_owned_run.py), so asyncio never reports "Task was destroyed
but it is pending"; and the spans of that life reach the collector through the OpenTelemetry SDK."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from bench.otlp import receiving

RUN = Path(__file__).with_name("_owned_run.py")
DESTROYED = re.compile(r"Task was destroyed but it is pending!\ntask: (.*)")
NOT_OURS = ("sse_starlette/sse.py",)
"""Tasks a library starts and owns itself: sse-starlette's shutdown watcher, one per event loop, which
`asyncio.run` (uvicorn's way to run a loop) cancels and this careless close does not."""


def test_a_hubs_life_leaves_no_task_pending_and_its_spans_reach_the_collector(tmp_path: Path) -> None:
    with receiving() as receiver:
        env = {
            "PATH": "/usr/bin:/bin",
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_SERVICE_NAME": "owned",
            "OTEL_BSP_SCHEDULE_DELAY": "50",
        }
        if "PYTHONPATH" in os.environ:  # (to run it against another tree)
            env["PYTHONPATH"] = os.environ["PYTHONPATH"]
        done = subprocess.run(
            [sys.executable, str(RUN), str(tmp_path / "t.db")],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        errors = "\n".join(line for line in done.stderr.splitlines() if '"ranch.access"' not in line)
        assert done.returncode == 0 and errors.endswith("lived"), errors[-3000:]
        destroyed = [task for task in DESTROYED.findall(done.stderr) if not any(n in task for n in NOT_OURS)]
        assert destroyed == [], destroyed
        names = {span.name for span in receiver.spans() if span.service == "owned"}
    assert {"ranch.turn outer", "ranch.turn inner", "ranch.hop inner", "ranch.hop desk"} <= names, names
    assert done.stderr.count('"ranch.access"') == 9  # every request's line, written by the log's own task
