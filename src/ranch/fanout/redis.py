"""The fan-out replicas share: Redis pub/sub for topics, Redis streams for logs.

One pub/sub connection per process, read by one task this fan-out owns (it is an async
context manager, entered in the hub's lifespan), hands each message to the process's
listeners of its topic; Redis subscriptions follow the listeners (first in, last out).
Keys and channels carry `prefix`, so several hubs can share one Redis.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectSendStream
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from ranch.fanout.base import LISTENER_BUFFER, LOG_LENGTH, Listening, Record

logger = logging.getLogger(__name__)

KEEPALIVE = "keepalive"
"""A topic every process listens to, so its pub/sub connection always has a subscription."""


class RedisFanout:
    """Topics and logs in Redis, shared by every replica using the same URL and prefix."""

    shared = True

    def __init__(self, url: str, *, prefix: str = "ranch") -> None:
        self.url = url
        self.prefix = prefix
        self._client: Redis = Redis.from_url(url, client_name=f"{prefix}:fanout")
        """Its connections are named after the prefix in Redis's CLIENT LIST."""
        self._pubsub: PubSub | None = None
        self._group: TaskGroup | None = None
        self._listeners: dict[str, set[MemoryObjectSendStream[bytes]]] = {}
        self._lock = anyio.Lock()

    async def __aenter__(self) -> RedisFanout:
        self._pubsub = self._client.pubsub(ignore_subscribe_messages=True)
        await self._pubsub.subscribe(self._channel(KEEPALIVE))
        self._group = anyio.create_task_group()
        await self._group.__aenter__()
        self._group.start_soon(self._read)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._group is not None:
            self._group.cancel_scope.cancel()
            await self._group.__aexit__(None, None, None)
            self._group = None
        for listeners in self._listeners.values():
            for stream in listeners:
                stream.close()
        self._listeners.clear()
        if self._pubsub is not None:
            await self._pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        await self._client.aclose()

    def _channel(self, topic: str) -> str:
        return f"{self.prefix}:topic:{topic}"

    def _key(self, log: str) -> str:
        return f"{self.prefix}:log:{log}"

    async def publish(self, topic: str, data: bytes) -> None:
        try:
            await self._client.publish(self._channel(topic), data)
        except RedisError:
            logger.warning("could not publish on %s; replicas listening there miss it", topic, exc_info=True)

    @asynccontextmanager
    async def listen(self, topic: str) -> AsyncIterator[Listening]:
        send, receive = anyio.create_memory_object_stream[bytes](LISTENER_BUFFER)
        async with self._lock:
            listeners = self._listeners.setdefault(topic, set())
            if not listeners and self._pubsub is not None:
                await self._pubsub.subscribe(self._channel(topic))
            listeners.add(send)
        try:
            yield receive
        finally:
            with anyio.CancelScope(shield=True):
                async with self._lock:
                    listeners = self._listeners.get(topic, set())
                    listeners.discard(send)
                    if not listeners:
                        self._listeners.pop(topic, None)
                        if self._pubsub is not None:
                            try:
                                await self._pubsub.unsubscribe(self._channel(topic))
                            except RedisError:
                                logger.warning("could not unsubscribe from %s", topic, exc_info=True)
            send.close()
            receive.close()

    async def _read(self) -> None:
        """Hand each message to this process's listeners of its topic."""
        assert self._pubsub is not None
        offset = len(self._channel(""))
        while True:
            try:
                message: dict[str, Any] | None = await self._pubsub.get_message(timeout=1.0)
            except RedisError:
                logger.warning("the Redis pub/sub connection failed; reconnecting", exc_info=True)
                self._end_listening()
                await anyio.sleep(0.5)
                continue
            if message is None or message.get("type") != "message":
                continue
            channel = message["channel"]
            topic = (channel.decode() if isinstance(channel, bytes) else str(channel))[offset:]
            for stream in list(self._listeners.get(topic, ())):
                try:
                    stream.send_nowait(message["data"])
                except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    self._listeners.get(topic, set()).discard(stream)
                    stream.close()

    def _end_listening(self) -> None:
        """End every listener's stream: what was published while the connection was down is lost,
        and a listener that sees its stream end knows to catch up (and listen again)."""
        for streams in self._listeners.values():
            for stream in streams:
                stream.close()

    async def append(self, log: str, data: bytes, *, ttl: float) -> str:
        key = self._key(log)
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.xadd(key, {"d": data}, maxlen=LOG_LENGTH, approximate=True)
            pipe.expire(key, max(1, int(ttl)))
            position, _ = await pipe.execute()
        return position.decode() if isinstance(position, bytes) else str(position)

    async def read(self, log: str, after: str = "", *, wait: float = 0.0) -> list[Record]:
        block = int(wait * 1000) if wait > 0 else None
        found: Any = await self._client.xread({self._key(log): after or "0-0"}, count=1000, block=block)
        records: list[Record] = []
        for _, entries in found or []:
            for position, fields in entries:
                name = position.decode() if isinstance(position, bytes) else str(position)
                records.append(Record(name, fields[b"d"]))
        return records

    async def tail(self, log: str, after: str = "", *, idle: float) -> AsyncIterator[Record]:
        while True:
            records = await self.read(log, after, wait=idle)
            if not records:
                return
            for record in records:
                yield record
            after = records[-1].position
