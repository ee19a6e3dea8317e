"""Gather: one socket write per response, against uvicorn's two (SendMessage c=32, side by side).

`ranch serve` runs uvicorn's httptools protocol with its writes gathered per loop tick
(`ranch.edge.coalesce`); `RANCH_COALESCE_WRITES=off` serves with uvicorn's own. Both `--auth keys`
servers (a key on every call, access log on) and bare Starlette take turns, `rounds` samples of
`seconds` each; each row is the median.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

from bench.common import median, table
from bench.wire import Server, serving


@contextlib.contextmanager
def _without_gathering() -> Iterator[None]:
    os.environ["RANCH_COALESCE_WRITES"] = "off"
    try:
        yield
    finally:
        del os.environ["RANCH_COALESCE_WRITES"]


def main(argv: list[str] | None = None) -> str:
    seconds = float(argv[0]) if argv else 2.0
    rounds = int(argv[1]) if argv and len(argv) > 1 else 6
    with contextlib.ExitStack() as stack:
        servers: dict[str, Server] = {"bare Starlette (fixed body)": stack.enter_context(serving("bare"))}
        servers["ranch serve --auth keys, writes gathered (default)"] = stack.enter_context(
            serving("ranch-keys")
        )
        with _without_gathering():
            servers["ranch serve --auth keys, RANCH_COALESCE_WRITES=off"] = stack.enter_context(
                serving("ranch-keys")
            )
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in servers}
        for _ in range(rounds):
            for name, server in servers.items():
                samples[name].append(server.sample("SendMessage", 32, seconds))
    bare = median([s["rps"] for s in samples["bare Starlette (fixed body)"]])
    rows = []
    for name, taken in samples.items():
        rps = median([s["rps"] for s in taken])
        cpu = median([s["cpu_us"] for s in taken])
        rows.append(
            [name, f"{rps:,.0f}", f"{cpu:.1f}", sum(int(s["errors"]) for s in taken), f"{rps / bare:.2f}x"]
        )
    note = (
        f"SendMessage c=32 to an echo agent; median of {rounds} samples of {seconds:g} s, "
        "the servers taking turns."
    )
    section = table("Gather", ["server", "req/s", "server CPU µs/req", "errors", "vs bare"], rows, note)
    print(section)
    return section


if __name__ == "__main__":
    main(sys.argv[1:])
