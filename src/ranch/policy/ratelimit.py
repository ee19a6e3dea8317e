"""Rate limits: token buckets per caller and per agent, in process or in Redis.

A bucket holds up to `burst` tokens and refills at `per_second`; each request
takes one. An empty bucket answers `Decision(allowed=False, retry_after=s)`, the
seconds until one token is back, which the bindings send as `Retry-After`.

`MemoryBuckets` keeps the buckets in this process (the default). `RedisBuckets`
keeps them in Redis, so several replicas share one budget: one Lua script reads,
refills, takes and writes a bucket atomically, on Redis's clock.

`peek` answers the same question without taking a token: the failed-authentication
budget is checked before a key is looked up and spent only when the key is refused.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ranch.utils.lru import Lru

if TYPE_CHECKING:  # the Redis client is loaded only by a hub given --redis-url
    from redis.asyncio import Redis

logger = logging.getLogger(__name__)

MAX_MEMORY_KEYS = 100_000
"""Buckets kept in process; the least recently used go first (a forgotten bucket is a full one)."""


@dataclass(frozen=True)
class Rate:
    """`per_second` tokens back each second, at most `burst` in the bucket."""

    per_second: float
    burst: int

    def __post_init__(self) -> None:
        if self.per_second <= 0 or self.burst < 1:
            raise ValueError(f"a rate needs per_second > 0 and burst >= 1, not {self}")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    retry_after: float = 0.0
    """Seconds until the next request would be allowed (0 when this one was)."""


ALLOWED = Decision(True)


class RateLimiter(Protocol):
    """Decides whether one more request under `key` may go ahead now."""

    async def check(self, key: str) -> Decision: ...

    async def peek(self, key: str) -> Decision:
        """Whether a request under `key` would be allowed now, taking nothing."""
        ...

    async def aclose(self) -> None: ...


class MemoryBuckets:
    """Token buckets in this process's memory."""

    def __init__(self, rate: Rate, clock: Any = time.monotonic) -> None:
        self.rate = rate
        self._clock = clock
        self._buckets: Lru[str, tuple[float, float]] = Lru(MAX_MEMORY_KEYS)

    async def check(self, key: str) -> Decision:
        return self._take(key, 1)

    async def peek(self, key: str) -> Decision:
        return self._take(key, 0)

    def _take(self, key: str, cost: int) -> Decision:
        now = self._clock()
        tokens, then = self._buckets.pop(key) or (float(self.rate.burst), now)
        tokens = min(float(self.rate.burst), tokens + (now - then) * self.rate.per_second)
        if tokens >= 1:
            decision, tokens = ALLOWED, tokens - cost
        else:
            decision = Decision(False, (1 - tokens) / self.rate.per_second)
        self._buckets.put(key, (tokens, now))
        return decision

    async def aclose(self) -> None:
        self._buckets.clear()


# KEYS[1] the bucket; ARGV: per_second, burst, cost (1 takes a token, 0 only looks).
# Returns {allowed (0/1), retry_after as a string}.
_TAKE = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1000000
local bucket = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(bucket[1]) or burst
local at = tonumber(bucket[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local allowed, wait = 0, (1 - tokens) / rate
if tokens >= 1 then
  allowed, wait, tokens = 1, 0, tokens - cost
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return {allowed, tostring(wait)}
"""


class RedisBuckets:
    """Token buckets in Redis, shared by every replica that uses the same `prefix`.

    When Redis cannot be reached the request is let through (a limiter must not
    take the service down with it) and the failure is logged, at most every 30 s.
    """

    def __init__(self, client: Redis, rate: Rate, prefix: str = "ranch:ratelimit:") -> None:
        self.client = client
        self.rate = rate
        self.prefix = prefix
        self._take = client.register_script(_TAKE)
        self._warned_at = -1e9

    @classmethod
    def from_url(cls, url: str, rate: Rate, prefix: str = "ranch:ratelimit:") -> RedisBuckets:
        from ranch.policy.redis_client import open_redis  # redis-py: only a hub given --redis-url loads it

        return cls(open_redis(url, name=f"{prefix}buckets"), rate, prefix)

    async def check(self, key: str) -> Decision:
        return await self._spend(key, 1)

    async def peek(self, key: str) -> Decision:
        return await self._spend(key, 0)

    async def _spend(self, key: str, cost: int) -> Decision:
        try:
            allowed, wait = await self._take(
                keys=[self.prefix + key], args=[self.rate.per_second, self.rate.burst, cost]
            )
        except Exception as exc:  # any failure of the client is Redis's (policy/redis_client.py)
            from ranch.policy.redis_client import forget_connections

            await forget_connections(self.client, exc)
            now = time.monotonic()
            if now - self._warned_at > 30:
                self._warned_at = now
                logger.warning("rate limits are not enforced: Redis did not answer: %s", exc)
            return ALLOWED
        return ALLOWED if int(allowed) else Decision(False, float(wait))

    async def aclose(self) -> None:
        await self.client.aclose()


class RatePolicy:
    """The two budgets a request spends: its caller's and its agent's; either may be off.

    `failures` is a third, spent only by refused API keys, per client address (hub/auth.py).
    """

    def __init__(
        self, callers: RateLimiter | None, agents: RateLimiter | None, failures: RateLimiter | None = None
    ) -> None:
        self.callers = callers
        self.agents = agents
        self.failures = failures

    @property
    def enabled(self) -> bool:
        return self.callers is not None or self.agents is not None

    async def admit(self, caller: str, agent: str) -> tuple[str, Decision]:
        """(the key that refused, its decision), or ("", ALLOWED)."""
        for limiter, key in ((self.callers, f"caller:{caller}"), (self.agents, f"agent:{agent}")):
            if limiter is None or key == "agent:":  # REST and WebSocket calls name no agent
                continue
            decision = await limiter.check(key)
            if not decision.allowed:
                return key, decision
        return "", ALLOWED

    async def aclose(self) -> None:
        limiters = (self.callers, self.agents, self.failures)
        for limiter in {id(x): x for x in limiters if x is not None}.values():
            await limiter.aclose()


def build_policy(
    caller: Rate | None,
    agent: Rate | None,
    redis_url: str | None,
    prefix: str = "ranch:ratelimit:",
    failures: Rate | None = None,
    clock: Any = time.monotonic,
) -> RatePolicy:
    """In-process buckets on `clock`, or Redis ones sharing one client when `redis_url` is set."""
    rates = (caller, agent, failures)
    if redis_url is None or all(rate is None for rate in rates):
        return RatePolicy(*(MemoryBuckets(rate, clock) if rate else None for rate in rates))
    from ranch.policy.redis_client import open_redis  # redis-py: loaded only when it is used

    client = open_redis(redis_url, name=f"{prefix}buckets")
    return RatePolicy(*(RedisBuckets(client, rate, prefix) if rate else None for rate in rates))
