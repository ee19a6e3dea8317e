"""One LRU for every bounded memory in ranch: at most `max_count` values, and at most `max_bytes`
of them when values have a size; the least recently used go first, each in O(1).

A value may be kept past its turn (`keep`: a conversation in the middle of a turn): eviction moves
it to the newest end instead, at most once a pass, so values all in use end the loop.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Lru(Generic[K, V]):
    """Values by key, the least recently used dropped first beyond `max_count` or `max_bytes`."""

    def __init__(
        self,
        max_count: int,
        max_bytes: int | None = None,
        *,
        keep: Callable[[V], bool] | None = None,
        dropped: Callable[[K, V], None] | None = None,
    ) -> None:
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.keep = keep
        """Says a value may not go now (it moves to the newest end instead)."""
        self.dropped = dropped
        """Told of each value evicted (not of those popped or cleared)."""
        self.size = 0
        """Bytes held: each value's as it was put, plus what it `grew` since."""
        self._items: OrderedDict[K, list[Any]] = OrderedDict()
        """Key -> [value, size]; a size changes in place (`grew`)."""

    def get(self, key: K) -> V | None:
        """The value, now the most recently used; None when there is none."""
        held = self._items.get(key)
        if held is None:
            return None
        self._items.move_to_end(key)
        value: V = held[0]
        return value

    def peek(self, key: K) -> V | None:
        """The value, left where it is in the order."""
        held = self._items.get(key)
        return None if held is None else held[0]

    def put(self, key: K, value: V, size: int = 0) -> None:
        """Hold `value` as the most recently used, then drop what is beyond the bounds. A value
        larger than `max_bytes` alone is not held."""
        self.pop(key)
        if self.max_bytes is not None and size > self.max_bytes:
            return
        self._items[key] = [value, size]
        self.size += size
        if self._over():
            self._evict()

    def grew(self, key: K, grown: int) -> None:
        """The value held under `key` changed size by `grown` bytes (drops others when it grew)."""
        held = self._items.get(key)
        if held is None:
            return
        held[1] += grown
        self.size += grown
        if grown > 0 and self._over():
            self._evict()

    def pop(self, key: K) -> V | None:
        held = self._items.pop(key, None)
        if held is None:
            return None
        self.size -= held[1]
        return held[0]  # type: ignore[no-any-return]

    def trim(self) -> None:
        """Drop the least recently used until within bounds (values kept by `keep` stay)."""
        if self._over():
            self._evict()

    def clear(self) -> None:
        self._items.clear()
        self.size = 0

    def values(self) -> Iterator[V]:
        return (held[0] for held in self._items.values())

    def items(self) -> Iterator[tuple[K, V]]:
        return ((key, held[0]) for key, held in self._items.items())

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def _over(self) -> bool:
        return len(self._items) > self.max_count or (
            self.max_bytes is not None and self.size > self.max_bytes
        )

    def _evict(self) -> None:
        passed = 0
        while self._over():
            if passed >= len(self._items):
                return
            key, held = self._items.popitem(last=False)
            if self.keep is not None and self.keep(held[0]):
                self._items[key] = held
                passed += 1
                continue
            self.size -= held[1]
            if self.dropped is not None:
                self.dropped(key, held[0])
