"""A clock that moves only when a test moves it, for TTLs and token buckets (`Settings(clock=...)`)."""

from __future__ import annotations


class Clock:
    """Monotonic seconds that stand still until `advance` (or an assignment to `now`)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
