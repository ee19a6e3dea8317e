"""`python -m bench [SECTION ...] [ARGS ...]` (or `make bench`): every benchmark, one table each, one run.

Sections: wire, gather, router, scale, fanout, scrub, cluster, tracing, rooms, grpc, durable (default:
all; cluster, rooms and durable need PostgreSQL and Redis on 127.0.0.1). `fanout` is one task's SSE
subscribers (bench/fanout.py) and then WebSocket watchers of one room (bench/watchers.py); `watchers`
runs the latter alone; `growth` (bench/growth.py: 100,000 conversations and a million rows, SQLite and
PostgreSQL; about 20 minutes) runs only when named. Every row of a table is measured in this run,
on this machine, so the ratios compare like with like.

The arguments after the section names go to each section named: `python -m bench growth --turns
2000 --rows 20000 --db sqlite`, `python -m bench rooms --quick`. With no arguments a section runs
its defaults.
"""

from __future__ import annotations

import importlib
import platform
import sys
import time

SECTIONS = (
    "wire", "gather", "router", "scale", "fanout", "scrub", "cluster", "tracing", "rooms", "grpc", "durable"
)  # fmt: skip
MODULES = {"fanout": ("fanout", "watchers"), "watchers": ("watchers",), "growth": ("growth",)}
"""Sections made of more than one module (or not in the default run); the rest are one module each."""


def split(argv: list[str]) -> tuple[list[str], list[str]]:
    """The leading section names, and the arguments after them (for each section named)."""
    names: list[str] = []
    for position, word in enumerate(argv):
        if word not in SECTIONS and word not in MODULES:
            return names, argv[position:]
        names.append(word)
    return names, []


def main() -> None:
    chosen, args = split(sys.argv[1:])
    if args and not chosen:
        raise SystemExit(
            f"name a section before its arguments: {' '.join(args)} (sections: {', '.join(SECTIONS)})"
        )
    stamp = time.strftime("%Y-%m-%d")
    print(f"# ranch benchmarks — {stamp}, Python {platform.python_version()}, {platform.machine()}\n")
    for name in chosen or SECTIONS:
        for module_name in MODULES.get(name, (name,)):
            module = importlib.import_module(f"bench.{module_name}")
            module.main(list(args))


if __name__ == "__main__":
    main()
