"""`python -m bench.scrub`: what the log scrubber costs on adversarial text, next to plain text.

`ranch.policy.logs.scrub` runs on every log record, on the event loop, over text a caller
controls (a URL path in the access log, a body in debug mode, an SDK's error quoting a field).
Each row times `scrub` on 8 KB and 64 KB of one kind of input built to make a regex backtrack:
long runs of e-mail local-part characters, `eyJ-eyJ-…` (JWT starts), digit runs, `a@a@a@…`,
`sk-sk-…`, `+999…` phone starts, and `token token …`. A linear scrubber costs about 8x as much on
64 KB as on 8 KB, and a few times plain text per byte; a quadratic one shows as 64x.

In process, no server; each cell is the best of `--repeat` runs.
"""

from __future__ import annotations

import argparse
import time

from bench.common import table
from ranch.policy.logs import MAX_FIELD_CHARS, scrub

SIZES = (8 * 1024, 64 * 1024)
UNITS = {
    "plain text": "the quick brown fox jumps over the lazy dog ",
    "e-mail local-part run `[A-Za-z0-9._%+-]`": "aB3._%+-",
    "JWT starts `eyJ-eyJ-…`": "eyJ-",
    "digit run `1111…`": "1",
    "spaced digits `1 1 1 …`": "1 ",
    "`a@a@a@…`": "a@",
    "key starts `sk-sk-…`": "sk-",
    "phone starts `+999…`": "+99999999999999999999 ",
    "`token token …`": "token ",
}
TARGET_GROWTH = 16.0
"""64 KB may cost at most this many times 8 KB (linear is 8; quadratic would be 64)."""


def timed(text: str, repeat: int) -> float:
    """The best of `repeat` runs of `scrub(text)`, in milliseconds."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        scrub(text)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs per cell; the best is kept")
    args = parser.parse_args(argv)
    measured = {
        name: [timed((unit * size)[:size], args.repeat) for size in SIZES] for name, unit in UNITS.items()
    }
    plain = measured["plain text"]
    rows = []
    for name, (small, large) in measured.items():
        growth = large / small if small else 0.0
        rows.append(
            [
                name,
                f"{small:.2f}",
                f"{large:.2f}",
                f"{growth:.1f}x",
                f"{large / plain[1]:.1f}x" if plain[1] else "-",
                "yes" if growth <= TARGET_GROWTH else "no",
            ]
        )
    note = (
        f"`scrub()` in process on {SIZES[0] // 1024} KB and {SIZES[1] // 1024} KB of each input, best of "
        f"{args.repeat} runs. A log record's fields are cut to {MAX_FIELD_CHARS:,} characters before "
        "scrubbing, so 64 KB is more than any one record scrubs. *64 KB / 8 KB*: linear is 8x, quadratic "
        f"64x; target <= {TARGET_GROWTH:.0f}x."
    )
    header = ["input", "8 KB ms", "64 KB ms", "64 KB / 8 KB", "vs plain text (64 KB)", "linear"]
    text = table("Log scrubbing, adversarial inputs", header, rows, note)
    print(text)
    return text


if __name__ == "__main__":
    main()
