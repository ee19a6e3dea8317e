"""The fan-out replicas share: Redis pub/sub for topics, Redis streams for logs.

One pub/sub connection per process, read by one task this fan-out owns (it is an async
context manager, entered in the hub's lifespan), hands each message to the process's
listeners of its topic; Redis subscriptions follow the listeners (first in, last out).
Keys and channels carry `prefix`, so several hubs can share one Redis.

Redis may drop connections at any time (a restart, a failover, a proxy). Whatever the pub/sub
connection raises then (not only `RedisError`: see policy/redis_client.py), the reader ends every
listener's stream (they catch up from the database) and connects again, waiting a little longer
after each failed attempt, up to RECONNECT_MAX, for as long as it takes. Only the reader and the
listeners' (un)subscriptions use that connection, one at a time (`_lock`), so a reconnection
never reads next to another read. With a cluster secret, every message and log entry is signed
and checked (fanout/signing.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from redis.asyncio.client import PubSub

from ranch.fanout.base import LISTENER_BUFFER, LOG_LENGTH, Listening, Record
from ranch.fanout.signing import Seal
from ranch.policy.redis_client import BLOCK_SLICE, REPLY_TIMEOUT, forget_connections, open_redis
from ranch.utils.backoff import Backoff
from ranch.utils.groups import Lifespan, background

logger = logging.getLogger(__name__)

KEEPALIVE = "keepalive"
"""A topic every process listens to, so its pub/sub connection always has a subscription."""
POLL = 0.25
"""Seconds the reader waits for a message before it lets a listener (un)subscribe."""
RECONNECT_FIRST = 0.2
RECONNECT_MAX = 5.0
RECONNECTS = Backoff(first=RECONNECT_FIRST, longest=RECONNECT_MAX, jitter=False)
"""Seconds between attempts to reconnect the pub/sub connection: doubling from the first to the max."""
CLOSE_TIMEOUT = 1.0
"""Seconds closing a dropped connection may take (a reset one may not answer)."""
WARN_EVERY = 60.0
"""Seconds between warnings while logs cannot be read."""
HEARTBEAT = 10.0
"""Quiet seconds after which the reader checks that its connection still hears (`_probe`)."""


class RedisFanout(Lifespan):
    """Topics and logs in Redis, shared by every replica using the same URL and prefix."""

    shared = True

    def __init__(self, url: str, *, prefix: str = "ranch", secret: str | None = None) -> None:
        self.url = url
        self.prefix = prefix
        self.seal = Seal(secret)
        """Signs what this replica writes and checks what it reads (no secret: neither)."""
        self._client = open_redis(url, name=f"{prefix}:fanout")
        """Its connections are named after the prefix in Redis's CLIENT LIST."""
        self._hearing = open_redis(url, name=f"{prefix}:fanout", retries=0)
        """The pub/sub connection's own client: a failure ends it, it never reconnects by itself."""
        self._pubsub: PubSub | None = None
        self._up = anyio.Event()
        """Set while the pub/sub connection is up; a new one is made when it drops."""
        self._listeners: dict[str, set[MemoryObjectSendStream[bytes]]] = {}
        self._lock = anyio.Lock()
        self._unread_warned = 0.0

    @property
    def connected(self) -> bool:
        """True while the pub/sub connection is up (what other replicas publish is heard)."""
        return self._pubsub is not None

    @asynccontextmanager
    async def lifespan(self) -> AsyncIterator[RedisFanout]:
        """Hearing the others while open (reconnecting as needed); its clients closed when closed."""
        await self._connect()  # Redis not answering at start fails the start
        try:
            async with background() as group:
                group.start_soon(self._read)
                yield self
        finally:
            await self._close()

    async def _close(self) -> None:
        for listeners in self._listeners.values():
            for stream in listeners:
                stream.close()
        self._listeners.clear()
        await self._drop()
        for client in (self._hearing, self._client):
            try:
                await client.aclose()
            except Exception:  # Redis gone while stopping: nothing is left to tell it
                logger.debug("could not close a Redis client", exc_info=True)

    def _channel(self, topic: str) -> str:
        return f"{self.prefix}:topic:{topic}"

    def _key(self, log: str) -> str:
        return f"{self.prefix}:log:{log}"

    async def publish(self, topic: str, data: bytes) -> None:
        channel = self._channel(topic)
        try:
            await self._client.publish(channel, self.seal.seal(channel, data))
        except Exception as exc:  # any failure of the client is Redis's (policy/redis_client.py)
            await forget_connections(self._client, exc)
            logger.warning("could not publish on %s; replicas listening there miss it: %r", topic, exc)

    @asynccontextmanager
    async def listen(self, topic: str) -> AsyncIterator[Listening]:
        send, receive = anyio.create_memory_object_stream[bytes](LISTENER_BUFFER)
        try:
            await self._subscribe(topic, send)
            yield receive
        finally:
            with anyio.CancelScope(shield=True):
                await self._unsubscribe(topic, send)
            send.close()
            receive.close()

    async def _subscribe(self, topic: str, send: MemoryObjectSendStream[bytes]) -> None:
        """Add a listener of `topic`, subscribing when it is the first; while the connection is
        down, once it is up again (then nothing published from now on is missed)."""
        while True:
            await self._up.wait()
            async with self._lock:
                if self._pubsub is None:
                    continue  # dropped again while this waited for the lock
                listeners = self._listeners.setdefault(topic, set())
                if not listeners:
                    try:
                        await self._pubsub.subscribe(self._channel(topic))
                    except Exception:
                        self._listeners.pop(topic, None)
                        await self._drop()  # the reader connects again
                        raise
                listeners.add(send)
                return

    async def _unsubscribe(self, topic: str, send: MemoryObjectSendStream[bytes]) -> None:
        async with self._lock:
            listeners = self._listeners.get(topic)
            if listeners is None or send not in listeners:
                return
            listeners.discard(send)
            if listeners:
                return
            del self._listeners[topic]
            if self._pubsub is not None:
                try:
                    await self._pubsub.unsubscribe(self._channel(topic))
                except Exception as exc:  # the reader connects again, without this topic
                    logger.warning("could not unsubscribe from %s: %r", topic, exc)
                    await self._drop()

    async def _connect(self) -> None:
        """A new pub/sub connection, subscribed to every topic listened to here."""
        pubsub = self._hearing.pubsub(ignore_subscribe_messages=True)
        channels = [self._channel(topic) for topic in (KEEPALIVE, *self._listeners)]
        try:
            await pubsub.subscribe(*channels)
        except BaseException:
            await _close(pubsub)
            raise
        self._pubsub = pubsub
        self._up.set()

    async def _drop(self) -> None:
        """Forget the pub/sub connection and end every listener's stream: what is published until
        the reader connects again is lost, and a listener that sees its stream end catches up."""
        pubsub, self._pubsub = self._pubsub, None
        if self._up.is_set():
            self._up = anyio.Event()
        self._end_listening()
        if pubsub is not None:
            await _close(pubsub)

    async def _read(self) -> None:
        """Hand each message to this process's listeners of its topic; reconnect when the
        connection fails, however it fails, until cancelled."""
        failures = 0
        heard = probed = time.monotonic()
        while True:
            try:
                async with self._lock:
                    if self._pubsub is None:
                        await self._connect()
                        logger.warning("the Redis pub/sub connection is back after %d attempt(s)", failures)
                        heard = probed = time.monotonic()
                    message = await self._subscribed().get_message(timeout=POLL)
                failures = 0
                heard, probed = await self._probe(message is not None, heard, probed)
            except Exception as exc:  # any failure of the client is Redis's (policy/redis_client.py)
                failures += 1
                if failures == 1:
                    logger.warning("the Redis pub/sub connection failed (%r); reconnecting", exc)
                async with self._lock:
                    await self._drop()
                await anyio.sleep(RECONNECTS.base(failures - 1))
                continue
            if message is not None and message.get("type") == "message":
                self._hand_out(message)

    def _subscribed(self) -> PubSub:
        assert self._pubsub is not None
        return self._pubsub

    async def _probe(self, got: bool, heard: float, probed: float) -> tuple[float, float]:
        """A connection that stays silent may be dead without a reset (a frozen network): after
        HEARTBEAT quiet seconds, publish on the keepalive topic, which this connection must hear
        within REPLY_TIMEOUT. (when something was last heard, when the last probe went out)"""
        now = time.monotonic()
        if got:
            return now, probed
        if probed > heard and now - probed > REPLY_TIMEOUT:
            raise ConnectionError(f"the pub/sub connection heard nothing for {now - heard:.0f} s")
        if probed <= heard and now - heard > HEARTBEAT:
            await self.publish(KEEPALIVE, b"")
            return heard, now
        return heard, probed

    def _hand_out(self, message: dict[str, Any]) -> None:
        raw = message["channel"]
        channel = raw.decode() if isinstance(raw, bytes) else str(raw)
        data = self.seal.open(channel, message["data"])
        if data is None:
            return
        topic = channel[len(self._channel("")) :]
        for stream in list(self._listeners.get(topic, ())):
            try:
                stream.send_nowait(data)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                self._listeners.get(topic, set()).discard(stream)
                stream.close()

    def _end_listening(self) -> None:
        for streams in self._listeners.values():
            for stream in streams:
                stream.close()

    async def append(self, log: str, data: bytes, *, ttl: float) -> str:
        key = self._key(log)
        try:
            async with self._client.pipeline(transaction=False) as pipe:
                pipe.xadd(key, {"d": self.seal.seal(key, data)}, maxlen=LOG_LENGTH, approximate=True)
                pipe.expire(key, max(1, int(ttl)))
                position, _ = await pipe.execute()
        except Exception as exc:  # the caller says what is missed; the pool must not keep a broken one
            await forget_connections(self._client, exc)
            raise
        return position.decode() if isinstance(position, bytes) else str(position)

    async def read(self, log: str, after: str = "", *, wait: float = 0.0) -> list[Record]:
        """Blocking reads last BLOCK_SLICE at most each, under the client's reply timeout. When
        Redis does not answer, the log reads as empty once `wait` is over (as a quiet log would)."""
        key, deadline = self._key(log), anyio.current_time() + wait
        while True:
            left = deadline - anyio.current_time()
            block = max(1, int(min(left, BLOCK_SLICE) * 1000)) if left > 0 else None
            try:
                found: Any = await self._client.xread({key: after or "0-0"}, count=1000, block=block)
            except Exception as exc:  # any failure of the client is Redis's (policy/redis_client.py)
                await forget_connections(self._client, exc)
                self._unreadable(log, exc)
                await anyio.sleep(max(0.0, deadline - anyio.current_time()))
                return []
            records, after = self._opened(key, found, after)
            if records or anyio.current_time() >= deadline:
                return records

    def _opened(self, key: str, found: Any, after: str) -> tuple[list[Record], str]:
        """The signed entries of an XREAD answer, and the position of the last entry in it."""
        records: list[Record] = []
        for _, entries in found or []:
            for position, fields in entries:
                after = position.decode() if isinstance(position, bytes) else str(position)
                data = self.seal.open(key, fields.get(b"d", b""))
                if data is not None:
                    records.append(Record(after, data))
        return records, after

    def _unreadable(self, log: str, exc: Exception) -> None:
        now = time.monotonic()
        if now - self._unread_warned >= WARN_EVERY:
            self._unread_warned = now
            logger.warning("could not read the log %s from Redis (%r); read as empty", log, exc)

    async def tail(self, log: str, after: str = "", *, idle: float) -> AsyncIterator[Record]:
        while True:
            records = await self.read(log, after, wait=idle)
            if not records:
                return
            for record in records:
                yield record
            after = records[-1].position


async def _close(pubsub: PubSub) -> None:
    """Close a pub/sub connection that may be broken, without waiting on it for long."""
    with anyio.move_on_after(CLOSE_TIMEOUT, shield=True):
        try:
            await pubsub.aclose()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
        except Exception:  # a reset connection fails to close too; it is dropped either way
            logger.debug("could not close a Redis pub/sub connection", exc_info=True)
