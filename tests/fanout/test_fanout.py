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


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_what_one_replica_publishes_the_others_hear_in_order(kind: str) -> None:
    async with replicas(kind) as (one, other):
        async with other.listen("room:a") as heard, other.listen("room:b") as elsewhere:
            await anyio.sleep(0.1)  # Redis: the subscription is active before the first publish
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
            await anyio.sleep(0.1)
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
            await anyio.sleep(0.1)
            await one.publish("catalog", b"after")
            with anyio.fail_after(5):
                assert await again.receive() == b"after"
