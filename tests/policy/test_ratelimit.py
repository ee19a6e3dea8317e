"""Rate limits: token buckets in process and in Redis; 429 with Retry-After on every binding."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import httpx
import pytest
from redis.asyncio import Redis

from _support.clock import Clock
from _support.hubkit import serve_ranch
from ranch.policy.ratelimit import MemoryBuckets, Rate, RatePolicy, RedisBuckets

pytestmark = pytest.mark.anyio
REDIS_URL = "redis://127.0.0.1:6379/0"
ECHO = "agents:\n  - {id: echo, kind: echo}\n  - {id: other, kind: echo}\n"


async def test_memory_bucket_refills_at_its_rate() -> None:
    clock = Clock()
    buckets = MemoryBuckets(Rate(per_second=2, burst=3), clock=clock)
    assert [(await buckets.check("k")).allowed for _ in range(4)] == [True, True, True, False]
    refused = await buckets.check("k")
    assert refused.retry_after == pytest.approx(0.5)
    assert (await buckets.check("other")).allowed  # keys are independent
    clock.now += refused.retry_after
    assert (await buckets.check("k")).allowed
    assert not (await buckets.check("k")).allowed
    clock.now += 10  # never more than the burst
    assert [(await buckets.check("k")).allowed for _ in range(4)] == [True, True, True, False]


async def test_policy_spends_caller_and_agent_budgets() -> None:
    policy = RatePolicy(MemoryBuckets(Rate(1, 2), clock=Clock()), MemoryBuckets(Rate(1, 3), clock=Clock()))
    assert (await policy.admit("a", "echo"))[1].allowed
    assert (await policy.admit("a", "echo"))[1].allowed
    key, decision = await policy.admit("a", "echo")
    assert key == "caller:a" and not decision.allowed
    assert (await policy.admit("b", "echo"))[1].allowed
    key, decision = await policy.admit("c", "echo")
    assert key == "agent:echo" and not decision.allowed


@pytest.fixture
async def redis_prefix() -> AsyncIterator[str]:
    """A key prefix unique to this test; Redis on 127.0.0.1:6379 is required, and its keys are removed."""
    client = Redis.from_url(REDIS_URL)
    try:
        await client.ping()
    except OSError as exc:  # redis' ConnectionError is an OSError
        await client.aclose()
        pytest.fail(f"these tests need Redis on 127.0.0.1:6379 (start redis-server): {exc}")
    prefix = f"ranch-test:{uuid.uuid4().hex}:"
    try:
        yield prefix
    finally:
        keys = [key async for key in client.scan_iter(match=f"{prefix}*")]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def test_redis_buckets_are_shared_and_atomic(redis_prefix: str) -> None:
    first = RedisBuckets(Redis.from_url(REDIS_URL), Rate(per_second=5, burst=10), redis_prefix)
    second = RedisBuckets(Redis.from_url(REDIS_URL), Rate(per_second=5, burst=10), redis_prefix)
    try:
        results: list[bool] = []

        async def take(buckets: RedisBuckets) -> None:
            results.append((await buckets.check("caller:x")).allowed)

        # connect both clients and load the script first: the burst below must take well under
        # the 200 ms a token takes to come back, even on a loaded machine
        await first.check("warm-up")
        await second.check("warm-up")
        async with anyio.create_task_group() as group:  # two "replicas", 30 concurrent requests
            for index in range(30):
                group.start_soon(take, first if index % 2 else second)
        assert results.count(True) == 10, results  # the burst, not one per replica or more
        refused = await first.check("caller:x")
        assert not refused.allowed and 0 < refused.retry_after <= 0.2
        await anyio.sleep(refused.retry_after + 0.05)  # honour it: one token is back
        assert (await second.check("caller:x")).allowed
    finally:
        await first.aclose()
        await second.aclose()


async def test_peek_answers_without_taking_a_token(redis_prefix: str) -> None:
    """The refused-keys budget looks before a lookup and spends only on a refusal."""
    for buckets in (
        MemoryBuckets(Rate(per_second=0.001, burst=2)),
        RedisBuckets(Redis.from_url(REDIS_URL), Rate(per_second=0.001, burst=2), redis_prefix),
    ):
        try:
            assert all([(await buckets.peek("k")).allowed for _ in range(5)])
            assert [(await buckets.check("k")).allowed for _ in range(2)] == [True, True]
            refused = await buckets.peek("k")
            assert not refused.allowed and refused.retry_after > 0
        finally:
            await buckets.aclose()


async def test_redis_down_lets_requests_through() -> None:
    buckets = RedisBuckets(Redis.from_url("redis://127.0.0.1:1/0"), Rate(1, 1), "ranch-test:")
    try:
        assert all([(await buckets.check("k")).allowed for _ in range(3)])
    finally:
        await buckets.aclose()


def _rpc(method: str = "SendMessage") -> dict[str, object]:
    return {
        "jsonrpc": "2.0",
        "id": 9,
        "method": method,
        "params": {
            "message": {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "hi"}]}
        },
    }


def _until_refused(send: Callable[[], httpx.Response], limit: int = 10) -> httpx.Response:
    for _ in range(limit):
        response = send()
        if response.status_code == 429:
            return response
    raise AssertionError(f"no 429 within {limit} requests")


@pytest.mark.parametrize("backend", ["memory", "redis"])
def test_429_with_retry_after_on_every_binding(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """Fast path, full-stack JSON-RPC (0.3) and HTTP+JSON all answer 429; waiting Retry-After is enough."""
    clock = Clock()  # the in-process buckets count its seconds; Redis counts its own
    settings: dict[str, object] = {"caller_rate": 4.0, "caller_burst": 2, "agent_rate": None, "clock": clock}
    if backend == "redis":
        settings["redis_url"] = REDIS_URL
        anyio.run(_require_redis)
    with serve_ranch(ECHO, tmp_path / "t.db", **settings) as ranch, httpx.Client(timeout=10) as http:
        url = ranch.agent_url("echo")
        v1 = {"A2A-Version": "1.0"}
        sends: dict[str, Callable[[], httpx.Response]] = {
            "fast path": lambda: http.post(url, json=_rpc(), headers=v1),
            "json-rpc 0.3": lambda: http.post(
                url,
                json={
                    **_rpc("message/send"),
                    "params": {
                        "message": {
                            "role": "user",
                            "kind": "message",
                            "messageId": uuid.uuid4().hex,
                            "parts": [{"kind": "text", "text": "hi"}],
                        }
                    },
                },
            ),
            "http+json": lambda: http.post(f"{url}/message:send", json=_rpc()["params"], headers=v1),
        }
        for name, send in sends.items():
            refused = _until_refused(send)
            wait = int(refused.headers["Retry-After"])
            assert wait >= 1, name
            error = refused.json()["error"]
            if name == "http+json":
                assert error["code"] == 429 and error["status"] == "RESOURCE_EXHAUSTED", error
            else:
                assert error["code"] == -32060 and refused.json()["id"] == 9, error
            assert "retry after" in error["message"], error
            clock.advance(wait) if backend == "memory" else time.sleep(wait)
            assert send().status_code == 200, name  # honouring Retry-After is enough
            if backend == "redis":
                break  # the bindings share the code above; Redis is proven on the fast path


async def _require_redis() -> None:
    client = Redis.from_url(REDIS_URL)
    try:
        await client.ping()
    except OSError as exc:
        pytest.fail(f"this test needs Redis on 127.0.0.1:6379 (start redis-server): {exc}")
    finally:
        await client.aclose()
