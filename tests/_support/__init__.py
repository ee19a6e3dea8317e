"""The test harness: servers, peers, probes and clients the tests share (fixtures live in conftest.py).

Imported as `from _support.servers import ServerThread`; `tests/` is on `sys.path` (conftest.py).
"""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
"""The tests folder: what a `ranch serve` child process needs on PYTHONPATH to import `_support`."""
