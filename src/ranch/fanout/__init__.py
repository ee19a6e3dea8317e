"""What every replica must hear at once: task events, room events, changes to what they cache.

A hub is one process by default, and everything here stays in it (`MemoryFanout`). With
`--redis-url` (and always with several replicas or `--workers`), it goes through Redis
(`RedisFanout`), so a SubscribeToTask or a WebSocket on one replica sees what a turn on
another does, and a key revoked on one is refused by all. Two kinds of channel:

- **topics** (`publish` / `listen`): live messages to whoever listens now (Redis pub/sub);
  what must not be lost is in the database first, and listeners fill gaps from there;
- **logs** (`append` / `read`): a short replayable log per key (Redis streams), for the
  events of a running task: a subscriber that comes late reads it from the start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ranch.fanout.base import Fanout, Listening, Record
from ranch.fanout.memory import MemoryFanout

if TYPE_CHECKING:
    from ranch.fanout.redis import RedisFanout

__all__ = ["Fanout", "Listening", "MemoryFanout", "Record", "RedisFanout", "open_fanout"]


def open_fanout(redis_url: str | None, *, prefix: str = "ranch", secret: str | None = None) -> Fanout:
    """Redis when a URL is given (shared by replicas, signing with `secret`), else this process's memory."""
    if not redis_url:
        return MemoryFanout()
    from ranch.fanout.redis import RedisFanout  # redis-py: only a hub given --redis-url loads it

    return RedisFanout(redis_url, prefix=prefix, secret=secret)


def __getattr__(name: str) -> Any:
    """`RedisFanout`, imported when first asked for (a one-process hub never loads redis-py)."""
    if name == "RedisFanout":
        from ranch.fanout.redis import RedisFanout

        return RedisFanout
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
