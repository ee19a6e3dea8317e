"""The fan-out of one process: topics as memory streams, logs as lists (the default hub)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from ranch.fanout.base import LISTENER_BUFFER, LOG_LENGTH, Listening, Record


class MemoryFanout:
    """Topics and logs for one process; nothing leaves it."""

    shared = False
    connected = True

    def __init__(self) -> None:
        self._listeners: dict[str, set[MemoryObjectSendStream[bytes]]] = {}
        self._logs: dict[str, tuple[deque[Record], float]] = {}
        self._counter = 0
        self._appended = anyio.Event()

    async def __aenter__(self) -> MemoryFanout:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for listeners in self._listeners.values():
            for stream in listeners:
                stream.close()
        self._listeners.clear()

    async def publish(self, topic: str, data: bytes) -> None:
        for stream in list(self._listeners.get(topic, ())):
            try:
                stream.send_nowait(data)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._listeners[topic].discard(stream)
                stream.close()

    @asynccontextmanager
    async def listen(self, topic: str) -> AsyncIterator[Listening]:
        send, receive = anyio.create_memory_object_stream[bytes](LISTENER_BUFFER)
        self._listeners.setdefault(topic, set()).add(send)
        try:
            yield receive
        finally:
            listeners = self._listeners.get(topic)
            if listeners is not None:
                listeners.discard(send)
                if not listeners:
                    del self._listeners[topic]
            send.close()
            receive.close()

    async def append(self, log: str, data: bytes, *, ttl: float) -> str:
        self._forget_expired()
        entries = self._logs.get(log, (deque(maxlen=LOG_LENGTH), 0.0))[0]
        self._counter += 1
        position = f"{self._counter:020d}"
        entries.append(Record(position, data))
        self._logs[log] = (entries, time.monotonic() + ttl)
        self._appended.set()
        self._appended = anyio.Event()
        return position

    async def read(self, log: str, after: str = "", *, wait: float = 0.0) -> list[Record]:
        found = self._after(log, after)
        if found or wait <= 0:
            return found
        with anyio.move_on_after(wait):
            while not found:
                await self._appended.wait()
                found = self._after(log, after)
        return found

    async def tail(self, log: str, after: str = "", *, idle: float) -> AsyncIterator[Record]:
        while True:
            records = await self.read(log, after, wait=idle)
            if not records:
                return
            for record in records:
                yield record
            after = records[-1].position

    def _after(self, log: str, after: str) -> list[Record]:
        held = self._logs.get(log)
        if held is None:
            return []
        return [record for record in held[0] if record.position > after]

    def _forget_expired(self) -> None:
        now = time.monotonic()
        for log in [name for name, (_, until) in self._logs.items() if until < now]:
            del self._logs[log]
