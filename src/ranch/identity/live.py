"""The long-lived connections of this process, by the API key they were opened with.

A request is checked when it arrives; a WebSocket, an A2A event stream (SSE) or an `/mcp` stream
stays open after that, so a key revoked or expired meanwhile must end it from outside: each
registers here with a way to end it, and a revocation (made here, or told by another replica
through `catalog/changes.py`) ends every connection of the key at once. A key that expires arms
a timer at its `expires_at`, so it ends without waiting for traffic. Ordinary requests never
register: only connections that outlive their request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ranch.db.models import iso
from ranch.exceptions import Unauthorized

REVOKED = "the API key was revoked"

End = Callable[[Unauthorized], None]
"""Ends one connection, telling its client why (called once, from the event loop, never awaited)."""


@dataclass(eq=False)
class Live:
    """One registered connection."""

    key_id: str
    end: End
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)
    ended: Unauthorized | None = None
    """Why it was ended; None while it may go on."""


class LiveConnections:
    """Every open long-lived connection of this process, by key id."""

    def __init__(self) -> None:
        self._by_key: dict[str, dict[Live, None]] = {}

    def open(self, key_id: str, expires_at: float | None, end: End) -> Live:
        """Register a connection opened with the key `key_id`; `end` is called when the key is
        revoked, or at `expires_at` (seconds since the epoch). `close` it when the connection ends."""
        live = Live(key_id, end)
        self._by_key.setdefault(key_id, {})[live] = None
        if expires_at is not None:
            expired = Unauthorized(f"the API key expired at {iso(expires_at)}")
            delay = max(0.0, expires_at - time.time())
            live.timer = asyncio.get_running_loop().call_later(delay, self._end, live, expired)
        return live

    def close(self, live: Live) -> None:
        """The connection ended (by itself or here): nothing more to end."""
        if live.timer is not None:
            live.timer.cancel()
            live.timer = None
        held = self._by_key.get(live.key_id)
        if held is not None:
            held.pop(live, None)
            if not held:
                del self._by_key[live.key_id]

    def revoked(self, key_id: str) -> int:
        """End every connection opened with `key_id`; how many were open."""
        doomed = list(self._by_key.get(key_id, ()))
        for live in doomed:
            self._end(live, Unauthorized(REVOKED))
        return len(doomed)

    def count(self, key_id: str) -> int:
        return len(self._by_key.get(key_id, ()))

    def _end(self, live: Live, reason: Unauthorized) -> None:
        if live.ended is not None:
            return
        live.ended = reason
        self.close(live)
        live.end(reason)
