"""A team at its limit of conversations drops one in O(1): a new conversation's cost does not grow
with how many are held (issue 41: copying every key on each call took 42 % of the server's CPU at 10k).

Counted, not timed: the held conversations live in a mapping that counts every key it hands out
(iterating, popping or looking up), and a new conversation at the limit may touch a few keys only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import anyio

from ranch.routing.context import Conversation, Conversations

HELD = 10_000
"""As many as MAX_CONVERSATIONS, the default limit."""


class Counting(OrderedDict[Any, Any]):
    """An OrderedDict that counts the keys it is asked for or gives out (and fails past `most`, so a
    loop that would never end fails instead)."""

    visited = 0
    most = 1_000_000

    def __iter__(self) -> Iterator[Any]:
        for key in super().__iter__():
            self.visited += 1
            yield key

    def keys(self) -> Any:
        return list(iter(self))

    def values(self) -> Any:
        return [super(Counting, self).__getitem__(key) for key in self]

    def items(self) -> Any:
        return [(key, super(Counting, self).__getitem__(key)) for key in self]

    def __getitem__(self, key: Any) -> Any:
        self.visited += 1
        return super().__getitem__(key)

    def get(self, key: Any, default: Any = None) -> Any:
        self.visited += 1
        return super().get(key, default)

    def pop(self, key: Any, *default: Any) -> Any:
        self.visited += 1
        return super().pop(key, *default)

    def popitem(self, last: bool = True) -> tuple[Any, Any]:
        self.visited += 1
        assert self.visited <= self.most, f"more than {self.most} keys visited"
        return super().popitem(last)


def at_limit(count: int = HELD) -> tuple[Conversations, Counting]:
    """`count` conversations held, at a limit of `count`, oldest first: c0, c1, ..."""
    conversations = Conversations(max_count=count)
    for index in range(count):
        conversations.get("owner", f"c{index}")
    counting = Counting(conversations._items._items)  # the LRU's own mapping (ranch.utils.lru)
    conversations._items._items = counting
    return conversations, counting


def test_a_new_conversation_at_the_limit_touches_a_few_keys_not_all_of_them() -> None:
    conversations, counting = at_limit()
    visits = []
    for index in range(100):
        counting.visited = 0
        conversations.get("owner", f"new{index}")
        visits.append(counting.visited)

    assert max(visits) <= 3, f"keys touched per new conversation: {sorted(set(visits))}"
    assert len(conversations) == HELD
    held = set(counting)
    assert ("owner", "c99") not in held and ("owner", "c100") in held  # the least recently used went


def test_a_conversation_in_a_turn_is_kept_and_passed_over_once() -> None:
    """The oldest conversations are in the middle of a turn (their locks held): they stay, each costs
    one more key, and the next unlocked one goes instead."""

    async def scenario() -> None:
        conversations, counting = at_limit()
        busy: list[Conversation] = [conversations.get("owner", f"c{index}") for index in range(5)]
        for index in range(5):  # the five busy ones are the oldest again
            counting.move_to_end(("owner", f"c{index}"), last=False)
        for conversation in busy:
            await conversation.lock.acquire()
        try:
            counting.visited = 0
            conversations.get("owner", "new")
            first = counting.visited
            counting.visited = 0
            conversations.get("owner", "newer")
            second = counting.visited
        finally:
            for conversation in busy:
                conversation.lock.release()

        assert first <= 5 + 3 and second <= 3, (first, second)
        held = set(counting)
        assert all(("owner", f"c{index}") in held for index in range(5))
        assert ("owner", "c5") not in held and ("owner", "c6") not in held

    anyio.run(scenario)


def test_a_known_conversation_is_kept_and_made_the_most_recent() -> None:
    conversations, counting = at_limit(3)
    first = conversations.get("owner", "c0")
    conversations.get("owner", "new")  # c1 is now the least recently used

    assert conversations.get("owner", "c0") is first
    assert list(counting) == [("owner", "c2"), ("owner", "new"), ("owner", "c0")]


def test_over_the_limit_with_every_older_conversation_in_a_turn_the_pass_ends() -> None:
    """Every conversation but the new one is in use: the pass ends after one round, the ones in use
    stay, and the new one is served without being kept (as before; it is stored after its turn)."""

    async def scenario() -> None:
        conversations, counting = at_limit(2)
        held = [conversations.get("owner", f"c{index}") for index in range(2)]
        for conversation in held:
            await conversation.lock.acquire()
        counting.visited, counting.most = 0, 10
        extra = conversations.get("owner", "extra")
        assert list(counting) == [("owner", "c0"), ("owner", "c1")]
        extra.add("user", "still usable for its turn")

    anyio.run(scenario)


def test_over_the_byte_bound_with_every_conversation_in_a_turn_the_pass_ends() -> None:
    """A conversation in a turn grows past the team's bytes while every one is in a turn: none can go,
    so the pass ends after one round (and drops nothing in use)."""

    async def scenario() -> None:
        conversations = Conversations(max_bytes=1_000, per_conversation=600)
        held = [conversations.get("owner", f"c{index}") for index in range(2)]
        counting = Counting(conversations._items._items)
        conversations._items._items = counting
        for conversation in held:
            await conversation.lock.acquire()
        counting.most = 10
        held[0].add("user", "x" * 500)
        held[1].add("user", "y" * 500)  # 1,000+ bytes held, both in a turn

        assert conversations.size > conversations.max_bytes
        assert list(counting) == [("owner", "c0"), ("owner", "c1")]

    anyio.run(scenario)
