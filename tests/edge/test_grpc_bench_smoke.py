"""bench/grpc.py still runs: at its smallest it prints its table, every row answered without errors
(the benchmark's smoke run, `make bench-smoke`; no speed is asserted)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench_smoke
ROOT = Path(__file__).resolve().parents[2]


def test_grpc_bench_measures_ranch_and_the_sdk_server() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")])}
    done = subprocess.run(
        [sys.executable, "-m", "bench", "grpc", "0.3"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    rows = [line for line in done.stdout.split("### gRPC", 1)[1].splitlines() if line.startswith("| ")]
    body = [row.strip("|").split("|") for row in rows[1:]]
    assert len(body) == 6, done.stdout  # 3 servers at c=1 and c=32
    assert all(cells[6].strip() == "0" for cells in body), done.stdout  # no errors
