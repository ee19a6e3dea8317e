"""`python -m bench [SECTION ...]` (or `make bench`): every benchmark, one table each, one run.

Sections: wire, gather, router, scale, fanout, scrub, cluster, tracing, rooms (default: all;
cluster and rooms need PostgreSQL and Redis on 127.0.0.1). `fanout` is one task's SSE subscribers
(bench/fanout.py) and then WebSocket watchers of one room (bench/watchers.py); `watchers` runs the
latter alone. Every row of a table is measured in this run, on this machine, so the ratios compare
like with like.
"""

from __future__ import annotations

import importlib
import platform
import sys
import time

SECTIONS = ("wire", "gather", "router", "scale", "fanout", "scrub", "cluster", "tracing", "rooms")
MODULES = {"fanout": ("fanout", "watchers"), "watchers": ("watchers",)}
"""Sections made of more than one module (or not in the default run); the rest are one module each."""


def main() -> None:
    chosen = [name for name in sys.argv[1:] if name in SECTIONS or name in MODULES] or list(SECTIONS)
    stamp = time.strftime("%Y-%m-%d")
    print(f"# ranch benchmarks — {stamp}, Python {platform.python_version()}, {platform.machine()}\n")
    for name in chosen:
        for module_name in MODULES.get(name, (name,)):
            module = importlib.import_module(f"bench.{module_name}")
            module.main([])


if __name__ == "__main__":
    main()
