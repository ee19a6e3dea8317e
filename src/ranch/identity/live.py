"""The long-lived connections of this process, by the API key they were opened with.

A request is checked when it arrives; a WebSocket, an A2A event stream (SSE) or an `/mcp` stream
stays open after that, so a key revoked or expired meanwhile must end it from outside: each
registers here with a way to end it, and a revocation (made here, or told by another replica
through `catalog/changes.py`) ends every connection of the key at once. A key that expires arms
a timer at its `expires_at`, so it ends without waiting for traffic. A replica that may have missed
revocations asks the database about every key held open here (`key_ids`, `KeyResolver.ended`). An
event stream also registers the agent it is bound to and its caller, so an agent removed (or no
longer visible to the caller) ends the streams that could not be opened now (`bound_to`).
Ordinary requests never register: only connections that outlive their request.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ranch.db.models import iso
from ranch.exceptions import RanchError, Unauthorized
from ranch.identity.principal import Principal

REVOKED = "the API key was revoked"

End = Callable[[Unauthorized], None]
"""Ends one connection, telling its client why (called once, from the event loop, never awaited)."""


@dataclass(frozen=True)
class Bound:
    """What an event stream is bound to: the agent it follows, its caller, and how it ends when the
    caller may no longer reach the agent (as `End`, with any error: AgentNotFound)."""

    agent_id: str
    principal: Principal
    lose: Callable[[RanchError], None]


def expired(expires_at: float) -> Unauthorized:
    """Why a connection of a key that expired at `expires_at` ends."""
    return Unauthorized(f"the API key expired at {iso(expires_at)}")


@dataclass(eq=False)
class Live:
    """One registered connection."""

    key_id: str
    end: End
    bound: Bound | None = None
    """An event stream's agent and caller (a WebSocket is bound to none)."""
    timer: asyncio.TimerHandle | None = field(default=None, repr=False)
    ended: RanchError | None = None
    """Why it was ended; None while it may go on."""


class LiveConnections:
    """Every open long-lived connection of this process, by key id (and event streams by agent)."""

    def __init__(self) -> None:
        self._by_key: dict[str, dict[Live, None]] = {}
        self._by_agent: dict[str, dict[Live, None]] = {}

    def open(self, key_id: str, expires_at: float | None, end: End, bound: Bound | None = None) -> Live:
        """Register a connection opened with the key `key_id`; `end` is called when the key is
        revoked, or at `expires_at` (seconds since the epoch). An event stream gives the agent it is
        `bound` to and its caller. `close` it when the connection ends."""
        live = Live(key_id, end, bound)
        self._by_key.setdefault(key_id, {})[live] = None
        if bound is not None:
            self._by_agent.setdefault(bound.agent_id, {})[live] = None
        if expires_at is not None:
            delay = max(0.0, expires_at - time.time())
            live.timer = asyncio.get_running_loop().call_later(delay, self.end, live, expired(expires_at))
        return live

    def close(self, live: Live) -> None:
        """The connection ended (by itself or here): nothing more to end."""
        if live.timer is not None:
            live.timer.cancel()
            live.timer = None
        _drop(self._by_key, live.key_id, live)
        if live.bound is not None:
            _drop(self._by_agent, live.bound.agent_id, live)

    def revoked(self, key_id: str, reason: Unauthorized | None = None) -> int:
        """End every connection opened with `key_id` (revoked, unless `reason` says otherwise); how
        many were open."""
        doomed = list(self._by_key.get(key_id, ()))
        for live in doomed:
            self.end(live, reason or Unauthorized(REVOKED))
        return len(doomed)

    def key_ids(self) -> list[str]:
        """The keys that connections open here were opened with."""
        return list(self._by_key)

    def agent_ids(self) -> list[str]:
        """The agents that event streams open here are bound to."""
        return list(self._by_agent)

    def bound_to(self, agent_id: str) -> list[Bound]:
        """The event streams open here on `agent_id`: what each is bound to."""
        return [live.bound for live in self._by_agent.get(agent_id, ()) if live.bound is not None]

    def lost(self, agent_id: str, principal: Principal, reason: RanchError) -> None:
        """End the event streams of `principal` on `agent_id`: it may not reach it any more (`reason`)."""
        for live in list(self._by_agent.get(agent_id, ())):
            if live.bound is not None and live.bound.principal == principal and self._stop(live, reason):
                live.bound.lose(reason)

    def count(self, key_id: str) -> int:
        return len(self._by_key.get(key_id, ()))

    def end(self, live: Live, reason: Unauthorized) -> None:
        """End one connection with `reason` (once: later calls do nothing)."""
        if self._stop(live, reason):
            live.end(reason)

    def _stop(self, live: Live, reason: RanchError) -> bool:
        """Mark `live` ended and forget it; False when it had ended already."""
        if live.ended is not None:
            return False
        live.ended = reason
        self.close(live)
        return True


def _drop(held: dict[str, dict[Live, None]], name: str, live: Live) -> None:
    connections = held.get(name)
    if connections is not None:
        connections.pop(live, None)
        if not connections:
            del held[name]
