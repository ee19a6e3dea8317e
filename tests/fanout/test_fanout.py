"""Topics and logs, in one process and through a real Redis at 127.0.0.1:6379.

Two `RedisFanout`s on one prefix stand for two replicas: what one publishes, the other's
listeners hear; what one appends to a log, the other reads from the start. Redis is needed:
without it these tests fail, saying so.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import anyio
import pytest
from redis.asyncio import Redis
from redis.exceptions import RedisError

from ranch.fanout import Fanout, MemoryFanout, RedisFanout

pytestmark = pytest.mark.anyio
REDIS = "redis://127.0.0.1:6379/0"


@asynccontextmanager
async def replicas(kind: str) -> AsyncIterator[tuple[Fanout, Fanout]]:
    """Two fan-outs that share what they publish: one memory fan-out twice, or two Redis clients."""
    if kind == "memory":
        async with MemoryFanout() as shared:
            yield shared, shared
        return
    try:
        async with Redis.from_url(REDIS) as probe:
            await probe.ping()
    except (RedisError, OSError) as exc:
        pytest.fail(f"this test needs Redis at 127.0.0.1:6379: {exc}")
    prefix = f"ranch-test-{uuid.uuid4().hex[:8]}"
    async with AsyncExitStack() as stack:
        first = await stack.enter_async_context(RedisFanout(REDIS, prefix=prefix))
        second = await stack.enter_async_context(RedisFanout(REDIS, prefix=prefix))
        yield first, second


async def listening(fanout: Fanout, *topics: str) -> None:
    """Until Redis counts a subscriber on each topic: what is published before that is heard by no
    one. A memory fan-out's listener hears from the start."""
    if not isinstance(fanout, RedisFanout):
        return
    channels = [f"{fanout.prefix}:topic:{topic}" for topic in topics]
    async with Redis.from_url(REDIS) as admin:
        with anyio.fail_after(10):
            while not all(count for _, count in await admin.pubsub_numsub(*channels)):  # noqa: ASYNC110
                await anyio.sleep(0.01)  # a count in Redis: there is no event to wait on


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_what_one_replica_publishes_the_others_hear_in_order(kind: str) -> None:
    async with replicas(kind) as (one, other):
        async with other.listen("room:a") as heard, other.listen("room:b") as elsewhere:
            await listening(other, "room:a", "room:b")
            for index in range(50):
                await one.publish("room:a", b"%d" % index)
            await one.publish("room:b", b"b")
            with anyio.fail_after(5):
                got = [await heard.receive() for _ in range(50)]
                assert await elsewhere.receive() == b"b"
        assert got == [b"%d" % index for index in range(50)]


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_a_late_reader_reads_a_log_from_the_start_then_waits_for_more(kind: str) -> None:
    async with replicas(kind) as (one, other):
        first = await one.append("task:t1", b"submitted", ttl=60)
        await one.append("task:t1", b"working", ttl=60)
        records = await other.read("task:t1")
        assert [r.data for r in records] == [b"submitted", b"working"]
        assert [r.data for r in await other.read("task:t1", first)] == [b"working"]

        async def later() -> None:
            await anyio.sleep(0.2)
            await one.append("task:t1", b"completed", ttl=60)

        async with anyio.create_task_group() as group:
            group.start_soon(later)
            tail = [r.data async for r in other.tail("task:t1", records[-1].position, idle=1.0)]
        assert tail == [b"completed"]
        assert await other.read("task:none") == []


async def test_a_listener_is_told_when_the_redis_connection_drops() -> None:
    """What was published while the connection was down is lost: the listener's stream ends, so it
    catches up from the database and listens again, and then hears what comes next."""
    async with replicas("redis") as (one, other):
        async with other.listen("catalog") as heard:
            await listening(other, "catalog")
            await one.publish("catalog", b"before")
            with anyio.fail_after(5):
                assert await heard.receive() == b"before"
            async with Redis.from_url(REDIS) as admin:  # the replicas' pub/sub connections drop
                name = f"{other.prefix}:fanout".encode()  # type: ignore[attr-defined]
                clients = await admin.client_list(_type="pubsub")
                ours = [client["id"] for client in clients if client["name"].encode() == name]
                assert ours and all([await admin.client_kill_filter(_id=id) for id in ours])
            with anyio.fail_after(10):
                rest = [message async for message in heard]
            assert rest == []  # ended, not hung
        async with other.listen("catalog") as again:
            await listening(other, "catalog")
            await one.publish("catalog", b"after")
            with anyio.fail_after(5):
                assert await again.receive() == b"after"


QUIET = 6.0
"""Seconds nothing happens: longer than redis-py's default reply timeout (5 s in 8.1)."""


async def test_a_reader_waiting_longer_than_the_reply_timeout_gets_what_comes_after_a_quiet_spell() -> None:
    """A replica following another's task waits up to 30 s for its next event: a quiet spell longer
    than the client's reply timeout is not a dead connection, and the event after it arrives."""
    async with replicas("redis") as (one, other):
        position = await one.append("task:quiet", b"working", ttl=60)
        async with other.listen("catalog") as heard:

            async def later() -> None:
                await anyio.sleep(QUIET)
                await one.append("task:quiet", b"completed", ttl=60)
                await one.publish("catalog", b"after the quiet spell")

            async with anyio.create_task_group() as group:
                group.start_soon(later)
                with anyio.fail_after(QUIET + 10):
                    records = await other.read("task:quiet", position, wait=QUIET + 8)
                    message = await heard.receive()
        assert [record.data for record in records] == [b"completed"]
        assert message == b"after the quiet spell"


async def test_a_log_entry_or_message_not_signed_with_the_secret_is_dropped() -> None:
    """With a cluster secret, what someone else writes into Redis (no signature, or another
    secret's) never reaches a listener or a reader; what the replicas write does."""
    prefix = f"ranch-test-{uuid.uuid4().hex[:8]}"
    secret = "the-replicas-shared-secret"
    async with AsyncExitStack() as stack:
        one = await stack.enter_async_context(RedisFanout(REDIS, prefix=prefix, secret=secret))
        other = await stack.enter_async_context(RedisFanout(REDIS, prefix=prefix, secret=secret))
        stranger = await stack.enter_async_context(RedisFanout(REDIS, prefix=prefix, secret="x" * 20))
        outsider = await stack.enter_async_context(Redis.from_url(REDIS))
        async with other.listen("rooms.events") as heard:
            await listening(other, "rooms.events")
            await outsider.publish(f"{prefix}:topic:rooms.events", b'{"kind":"live"}')
            await stranger.publish("rooms.events", b"from another secret")
            await one.publish("rooms.events", b"genuine")
            with anyio.fail_after(5):
                assert await heard.receive() == b"genuine"
        await outsider.xadd(f"{prefix}:log:task:t", {"d": b"forged event"})
        await stranger.append("task:t", b"another secret's event", ttl=60)
        await one.append("task:t", b"genuine event", ttl=60)
        assert [record.data for record in await other.read("task:t")] == [b"genuine event"]
        assert other.seal.refused == 4
