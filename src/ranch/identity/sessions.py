"""Sessions: one per (caller, context), alive while used at least once every `ttl` seconds.

A session starts on a caller's first call on a context (an A2A contextId, a room)
and each call refreshes it. A call after `ttl` seconds of silence answers
`SessionExpired` and ends the session; the caller's next call on the same context
starts a new one (the entry's own access checks still apply). Sessions live in the
server's memory, so each process (each replica) keeps its own.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from ranch.exceptions import SessionExpired

DEFAULT_SESSION_TTL = 3600.0
MAX_SESSIONS = 100_000
"""Sessions kept at most; the least recently used are forgotten first."""


class Sessions:
    """The sessions of one process, keyed by (caller, context id)."""

    def __init__(
        self,
        ttl: float = DEFAULT_SESSION_TTL,
        *,
        max_sessions: int = MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl <= 0:
            raise ValueError(f"a session TTL is a positive number of seconds, not {ttl}")
        self.ttl = ttl
        self._max = max_sessions
        self._clock = clock
        self._last_used: OrderedDict[tuple[str, str], float] = OrderedDict()

    def touch(self, caller: str, context_id: str) -> bool:
        """Start or refresh the session; True when it is new. Raises SessionExpired (and drops it)."""
        key = (caller, context_id)
        now = self._clock()
        last = self._last_used.pop(key, None)
        if last is not None and now - last > self.ttl:
            raise SessionExpired(
                f"the session on context '{context_id}' expired after {self.ttl:g} s without use; "
                "the next call on this context starts a new one",
                "contextId",
            )
        self._last_used[key] = now
        while len(self._last_used) > self._max:
            self._last_used.popitem(last=False)
        return last is None

    def __len__(self) -> int:
        return len(self._last_used)
