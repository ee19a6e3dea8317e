"""How long to wait between attempts, and what a server's `Retry-After` asks for.

One policy for every retry loop in ranch (webhook deliveries, task saves, LLM providers): waits
grow from `first` by `factor` up to `longest`, with jitter unless it is turned off; a server's
`Retry-After` is honoured up to `longest_asked`.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Backoff:
    """Attempts and waits between them: `first` s, times `factor` each time, at most `longest` s."""

    attempts: int = 4
    first: float = 0.5
    longest: float = 8.0
    factor: float = 2.0
    jitter: bool = True
    """Each wait drawn from its upper half, so callers that failed together do not retry together."""
    longest_asked: float | None = None
    """The longest `Retry-After` honoured; None: `longest`."""
    at_least_backoff: bool = True
    """A `Retry-After` shorter than the backoff waits the backoff (False: what the server asked)."""

    def base(self, attempt: int) -> float:
        """The wait after attempt `attempt` (0 for the first), before jitter."""
        return min(self.longest, self.first * self.factor ** min(attempt, 64))  # no overflow, however long

    def wait(self, attempt: int, retry_after: float | None = None) -> float:
        base = self.base(attempt)
        if retry_after is not None:
            asked = max(base, retry_after) if self.at_least_backoff else retry_after
            return min(self.longest if self.longest_asked is None else self.longest_asked, asked)
        return base * random.uniform(0.5, 1.0) if self.jitter else base


def retry_after(headers: Mapping[str, str]) -> float | None:
    """`Retry-After` (or `retry-after-ms`) in seconds; None when absent or unreadable (an HTTP date:
    rare from the servers ranch calls; the caller backs off instead)."""
    millis, value = headers.get("retry-after-ms"), headers.get("retry-after")
    try:
        if millis is not None:
            return max(0.0, float(millis) / 1000)
        if value is not None:
            return max(0.0, float(value))
    except ValueError:
        return None
    return None
