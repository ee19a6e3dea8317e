"""The `Fanout` interface: topics to publish and listen to, and short logs to append to and read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from anyio.streams.memory import MemoryObjectReceiveStream

LISTENER_BUFFER = 4096
"""Messages a listener may fall behind by; one that falls further is closed (it catches up from
the database: nothing a topic carries is only there)."""
LOG_LENGTH = 10_000
"""Entries a log keeps (the oldest go first): a running task's events."""

Listening = MemoryObjectReceiveStream[bytes]
"""The messages of a topic, as they are published, while the listener is open."""


@dataclass(frozen=True)
class Record:
    """One entry of a log: its position (to read after) and its data."""

    position: str
    data: bytes


class Fanout(Protocol):
    """What replicas tell each other (see the package docstring)."""

    shared: bool
    """True when other processes hear what this one publishes (Redis)."""

    @property
    def connected(self) -> bool:
        """True while this process hears what the others publish (always, in one process)."""
        ...

    async def __aenter__(self) -> Fanout: ...

    async def __aexit__(self, *exc_info: object) -> None: ...

    async def publish(self, topic: str, data: bytes) -> None:
        """Tell whoever listens to `topic` now, in every replica."""

    def listen(self, topic: str) -> AbstractAsyncContextManager[Listening]:
        """The messages published on `topic` from now on, while the block runs. The stream ends
        early when messages may have been missed (a lost connection, a listener that fell behind):
        the listener catches up from the truth and listens again."""

    async def append(self, log: str, data: bytes, *, ttl: float) -> str:
        """Add an entry to `log` (kept `ttl` seconds after its last entry); its position."""

    async def read(self, log: str, after: str = "", *, wait: float = 0.0) -> list[Record]:
        """The entries after position `after` ("" = from the start), waiting up to `wait` s for one.
        A log that cannot be read (Redis not answering) reads as empty, once `wait` is over."""

    def tail(self, log: str, after: str = "", *, idle: float) -> AsyncIterator[Record]:
        """Every entry after `after`, as they come, until none came for `idle` seconds."""
