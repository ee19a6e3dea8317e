"""`python -m bench [SECTION ...]` (or `make bench`): every benchmark, one table each, one run.

Sections: wire, gather, router, scale, fanout, scrub, cluster, tracing (default: all; cluster needs PostgreSQL
and Redis on 127.0.0.1). Every row of a table is
measured in this run, on this machine, so the ratios compare like with like.
"""

from __future__ import annotations

import importlib
import platform
import sys
import time

SECTIONS = ("wire", "gather", "router", "scale", "fanout", "scrub", "cluster", "tracing")


def main() -> None:
    chosen = [name for name in sys.argv[1:] if name in SECTIONS] or list(SECTIONS)
    stamp = time.strftime("%Y-%m-%d")
    print(f"# ranch benchmarks — {stamp}, Python {platform.python_version()}, {platform.machine()}\n")
    for name in chosen:
        module = importlib.import_module(f"bench.{name}")
        module.main([])


if __name__ == "__main__":
    main()
