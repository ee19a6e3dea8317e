"""Sessions: one per (caller, context), alive while used at least once every `ttl` seconds.

A session starts on a caller's first call on a context (an A2A contextId, a room)
and each call refreshes it. A call after `ttl` seconds of silence answers
`SessionExpired` and ends the session; the caller's next call on the same context
starts a new one (the entry's own access checks still apply). `Sessions` keeps them in
the server's memory; with `--redis-url`, `RedisSessions` keeps them in Redis, so every
replica sees the same sessions (a session used on one and left idle expires on all).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from ranch.exceptions import SessionExpired
from ranch.utils.lru import Lru

if TYPE_CHECKING:  # the Redis client is loaded only by a hub given --redis-url
    from redis.asyncio import Redis

logger = logging.getLogger(__name__)

DEFAULT_SESSION_TTL = 3600.0
MAX_SESSIONS = 100_000
"""Sessions kept at most; the least recently used are forgotten first."""


class SessionStore(Protocol):
    """Where sessions are kept: this process (`Sessions`) or Redis (`RedisSessions`)."""

    ttl: float

    async def touch(self, caller: str, context_id: str) -> bool:
        """Start or refresh the session; True when it is new. Raises SessionExpired (and ends it)."""
        ...

    async def aclose(self) -> None: ...


def _expired(context_id: str, ttl: float) -> SessionExpired:
    return SessionExpired(
        f"the session on context '{context_id}' expired after {ttl:g} s without use; "
        "the next call on this context starts a new one",
        "contextId",
    )


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
        self._last_used: Lru[tuple[str, str], float] = Lru(max_sessions)

    async def touch(self, caller: str, context_id: str) -> bool:
        """Start or refresh the session; True when it is new. Raises SessionExpired (and drops it)."""
        key = (caller, context_id)
        now = self._clock()
        last = self._last_used.pop(key)
        if last is not None and now - last > self.ttl:
            raise _expired(context_id, self.ttl)
        self._last_used.put(key, now)
        return last is None

    async def aclose(self) -> None:
        return None

    def __len__(self) -> int:
        return len(self._last_used)


_TOUCH = """
local last = redis.call('GET', KEYS[1])
if last and tonumber(ARGV[1]) - tonumber(last) > tonumber(ARGV[2]) then
  redis.call('DEL', KEYS[1])
  return -1
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
if last then return 0 end
return 1
"""
"""One session's touch, atomic across replicas: -1 expired (and ended), 0 refreshed, 1 new."""
KEPT_AFTER_EXPIRY = 86_400.0
"""Seconds Redis keeps an idle session past its TTL, to answer SessionExpired once; then it is gone."""


WARN_EVERY = 60.0
"""Seconds between warnings while Redis does not answer."""


class RedisSessions:
    """Sessions every replica shares, in Redis under `prefix`: each key holds its last call's time.

    The time is this process's wall clock (`clock`), so replicas compare like with like as long
    as their clocks agree (NTP). When Redis cannot be reached, calls go ahead without a session
    check (a warning is logged): sessions scope conversations, they do not authenticate.
    """

    def __init__(
        self, client: Redis, ttl: float, *, prefix: str = "ranch", clock: Callable[[], float] = time.time
    ) -> None:
        if ttl <= 0:
            raise ValueError(f"a session TTL is a positive number of seconds, not {ttl}")
        self.ttl = ttl
        self._client = client
        self._prefix = f"{prefix}:session:"
        self._clock = clock
        self._touch = client.register_script(_TOUCH)
        self._keep_ms = str(int((ttl + KEPT_AFTER_EXPIRY) * 1000))
        self._skipped = 0
        """Checks skipped since Redis last answered."""
        self._warned = 0.0

    @classmethod
    def from_url(cls, url: str, ttl: float, *, prefix: str = "ranch") -> RedisSessions:
        from ranch.policy.redis_client import open_redis  # redis-py: only a hub given --redis-url loads it

        return cls(open_redis(url, name=f"{prefix}:sessions"), ttl, prefix=prefix)

    async def touch(self, caller: str, context_id: str) -> bool:
        key = f"{self._prefix}{len(caller)}:{caller}:{context_id}"  # the length keeps the two apart
        try:
            said = await self._touch(keys=[key], args=[repr(self._clock()), repr(self.ttl), self._keep_ms])
        except Exception as exc:  # any failure of the client is Redis's (policy/redis_client.py)
            from ranch.policy.redis_client import forget_connections

            await forget_connections(self._client, exc)
            self._unanswered(exc)
            return False
        if self._skipped:
            logger.warning(
                "Redis answers again: sessions are checked (%d check(s) were skipped)", self._skipped
            )
            self._skipped, self._warned = 0, 0.0
        if said == -1:
            raise _expired(context_id, self.ttl)
        return bool(said == 1)

    def _unanswered(self, exc: BaseException) -> None:
        """One warning when Redis stops answering, then one a minute while it stays silent (a call
        without a session check is logged, not every one: the log stays readable under load)."""
        self._skipped += 1
        now = time.monotonic()
        if not self._warned or now - self._warned >= WARN_EVERY:
            self._warned = now
            logger.warning(
                "sessions are not checked: Redis did not answer (%s); %d check(s) skipped so far",
                exc,
                self._skipped,
            )

    async def aclose(self) -> None:
        await self._client.aclose()
