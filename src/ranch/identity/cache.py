"""A small cache of database answers read on every call (keys, agent visibility).

Each value is kept `ttl` seconds. When one expires under load, the callers asking for it at that
moment share one lookup (single flight) instead of each sending its own query: at c=32 an
expiry would otherwise cost 32 queries at once, and the queue they form on the connection pool
stalls every request behind them. `forget` drops a value at once (a revocation): a lookup that
started before it does not put its answer back, and a caller arriving after it never joins that
lookup (it could carry the revoked answer) but starts its own.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

import anyio

from ranch.utils.lru import Lru

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Flight(Generic[V]):
    """One lookup in progress; the callers who asked meanwhile wait on `done`."""

    __slots__ = ("done", "error", "landed", "value")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.landed = False
        self.value: V | None = None
        self.error: Exception | None = None


class TtlCache(Generic[K, V]):
    """At most `size` values, each for `ttl` seconds of `clock`; the oldest are dropped first."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._values: Lru[K, tuple[float, V]] = Lru(size)
        """By when each was looked up; the oldest lookups are dropped first."""
        self._flights: dict[K, _Flight[V]] = {}
        self._generation = 0
        """Bumped by `forget`: a lookup that started before it does not fill the cache."""

    def peek(self, key: K) -> V | None:
        """The value if it is still fresh, else None (no lookup)."""
        held = self._values.peek(key)
        if held is not None and self._clock() - held[0] < self.ttl:
            return held[1]
        return None

    async def get(
        self, key: K, load: Callable[[], Awaitable[V]], keep: Callable[[V], bool] | None = None
    ) -> V:
        """The fresh value of `key`, else `load()`'s, shared with whoever asks meanwhile; `keep`
        says whether an answer may be kept (an error never is)."""
        held = self._values.peek(key)
        if held is not None and self._clock() - held[0] < self.ttl:
            return held[1]
        while (flight := self._flights.get(key)) is not None:
            await flight.done.wait()
            if flight.landed:
                return flight.value  # type: ignore[return-value]
            if flight.error is not None:
                raise flight.error
            # the caller who looked it up was cancelled: look it up ourselves
        return await self._fly(key, load, keep)

    async def _fly(self, key: K, load: Callable[[], Awaitable[V]], keep: Callable[[V], bool] | None) -> V:
        flight: _Flight[V] = _Flight()
        self._flights[key] = flight
        generation = self._generation
        try:
            value = await load()
            flight.landed, flight.value = True, value
        except Exception as exc:
            flight.error = exc
            raise
        finally:  # on success, an error or a cancellation alike: the waiters go on
            if self._flights.get(key) is flight:  # not already detached by a `forget`
                del self._flights[key]
            flight.done.set()
        if generation == self._generation and (keep is None or keep(value)):
            self._values.put(key, (self._clock(), value))
        return value

    def forget(self, key: K) -> None:
        self._generation += 1
        self._values.pop(key)
        self._flights.pop(key, None)  # its waiters get its answer; later callers look up afresh

    def forget_all(self) -> None:
        self._generation += 1
        self._values.clear()
        self._flights.clear()

    def forget_where(self, doomed: Callable[[V], bool]) -> None:
        """Drop every value `doomed` picks (a revoked key, whatever digest it was kept under)."""
        self._generation += 1
        for key in [key for key, (_, value) in self._values.items() if doomed(value)]:
            self._values.pop(key)
        self._flights.clear()  # what a lookup in progress will answer is not known yet
