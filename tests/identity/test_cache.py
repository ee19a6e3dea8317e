"""The cache every keyed call reads (keys, agent visibility): one lookup per expiry, however many
callers ask at that moment; a revocation is never undone by a lookup already in flight."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from sqlalchemy.ext.asyncio import async_sessionmaker

from _support.clock import Clock
from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.exceptions import RateLimited, Unauthorized
from ranch.identity.cache import TtlCache
from ranch.identity.resolver import AuthFailures, KeyResolver
from ranch.policy.ratelimit import MemoryBuckets, Rate

pytestmark = pytest.mark.anyio


class Source:
    """A lookup that blocks until released, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = anyio.Event()
        self.answer = "v1"

    async def load(self) -> str:
        self.calls += 1
        await self.release.wait()
        return self.answer


async def test_callers_asking_during_one_lookup_share_it() -> None:
    cache: TtlCache[str, str] = TtlCache(ttl=5, size=10)
    source = Source()
    answers: list[str] = []

    async def ask() -> None:
        answers.append(await cache.get("k", source.load))

    async with anyio.create_task_group() as group:
        for _ in range(32):
            group.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        source.release.set()
    assert answers == ["v1"] * 32 and source.calls == 1


async def test_a_value_is_looked_up_again_once_it_expires() -> None:
    clock = Clock()
    cache: TtlCache[str, str] = TtlCache(ttl=5, size=10, clock=clock)
    source = Source()
    source.release.set()
    assert await cache.get("k", source.load) == "v1"
    source.answer = "v2"
    clock.advance(4.9)
    assert await cache.get("k", source.load) == "v1" and source.calls == 1
    clock.advance(0.2)
    assert await cache.get("k", source.load) == "v2" and source.calls == 2


async def test_a_lookup_in_flight_when_the_value_is_forgotten_does_not_bring_it_back() -> None:
    cache: TtlCache[str, str] = TtlCache(ttl=5, size=10)
    source = Source()
    async with anyio.create_task_group() as group:
        group.start_soon(cache.get, "k", source.load)
        await anyio.wait_all_tasks_blocked()
        cache.forget("k")  # revoked while the query ran
        source.release.set()
    assert cache.peek("k") is None


@pytest.mark.parametrize("forget", ["one", "all", "where"])
async def test_a_caller_arriving_after_a_forget_never_joins_the_lookup_begun_before(forget: str) -> None:
    cache: TtlCache[str, str] = TtlCache(ttl=5, size=10)
    stale, fresh = Source(), Source()
    fresh.answer = "v2"
    answers: dict[str, str] = {}

    async def ask(who: str, source: Source) -> None:
        answers[who] = await cache.get("k", source.load)

    async with anyio.create_task_group() as group:
        group.start_soon(ask, "early", stale)  # the old key's lookup is under way ...
        await anyio.wait_all_tasks_blocked()
        if forget == "one":  # ... when the key is revoked
            cache.forget("k")
        elif forget == "all":
            cache.forget_all()
        else:
            cache.forget_where(bool)
        group.start_soon(ask, "late", fresh)
        await anyio.wait_all_tasks_blocked()
        stale.release.set()
        fresh.release.set()
    assert answers == {"early": "v1", "late": "v2"} and fresh.calls == 1
    assert await cache.get("k", stale.load) == "v2"  # the late answer is the one kept


async def test_an_error_reaches_every_waiter_and_is_not_kept() -> None:
    cache: TtlCache[str, str] = TtlCache(ttl=5, size=10)
    release = anyio.Event()
    calls = 0

    async def refuse() -> str:
        nonlocal calls
        calls += 1
        await release.wait()
        raise PermissionError("unknown key")

    errors: list[Exception] = []

    async def ask() -> None:
        try:
            await cache.get("k", refuse)
        except PermissionError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(ask)
        await anyio.wait_all_tasks_blocked()
        release.set()
    assert len(errors) == 3 and calls == 1
    with pytest.raises(PermissionError):
        await cache.get("k", refuse)
    assert calls == 2  # asked again: a refusal is never kept


async def test_waiters_look_it_up_themselves_when_the_first_caller_is_cancelled() -> None:
    cache: TtlCache[str, str] = TtlCache(ttl=5, size=10)
    source = Source()
    got: list[str] = []

    async def leader(scope: anyio.CancelScope) -> None:
        with scope:
            await cache.get("k", source.load)

    async def waiter() -> None:
        got.append(await cache.get("k", source.load))

    scope = anyio.CancelScope()
    async with anyio.create_task_group() as group:
        group.start_soon(leader, scope)
        await anyio.wait_all_tasks_blocked()
        group.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        scope.cancel()  # the caller whose query it was hangs up
        await anyio.wait_all_tasks_blocked()
        source.release.set()
    assert got == ["v1"] and source.calls >= 2


async def test_values_not_worth_keeping_are_asked_for_again() -> None:
    cache: TtlCache[str, str | None] = TtlCache(ttl=5, size=10)
    calls = 0

    async def missing() -> str | None:
        nonlocal calls
        calls += 1
        return None

    for _ in range(2):
        assert await cache.get("k", missing, keep=lambda value: value is not None) is None
    assert calls == 2


async def test_callers_sharing_a_refused_key_lookup_each_spend_their_own_address(tmp_path: Path) -> None:
    """Through `KeyResolver`: two addresses present one unknown key at the same moment; the query is
    shared, and each address's refused-keys budget is spent, so neither guesses for free."""
    engine = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'keys.db'}")
    await migrate.upgrade(engine)
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    clock = Clock()
    failures = AuthFailures(MemoryBuckets(Rate(per_second=0.001, burst=1), clock=clock))
    resolver = KeyResolver(lambda: sessions, clock=clock, failures=failures)
    refused: list[str] = []

    async def guess(address: str) -> None:
        try:
            await resolver.resolve("rk_not_a_key", address)
        except Unauthorized:
            refused.append(address)

    try:
        async with anyio.create_task_group() as group:
            for address in ("127.0.0.1", "127.0.0.2"):
                group.start_soon(guess, address)
        assert sorted(refused) == ["127.0.0.1", "127.0.0.2"]
        for address in ("127.0.0.1", "127.0.0.2"):  # each budget (one refusal) is spent
            with pytest.raises(RateLimited):
                await resolver.resolve("rk_not_a_key", address)
    finally:
        await engine.dispose()


async def test_forgetting_everything_also_stops_lookups_in_flight_from_landing() -> None:
    """What a replica does when it may have missed revocations: nothing it held, or was fetching, stays."""
    cache: TtlCache[str, str] = TtlCache(ttl=5, size=10)
    source = Source()
    source.release.set()
    await cache.get("a", source.load)
    held = Source()
    async with anyio.create_task_group() as group:
        group.start_soon(cache.get, "b", held.load)
        await anyio.wait_all_tasks_blocked()
        cache.forget_all()
        held.release.set()
    assert cache.peek("a") is None and cache.peek("b") is None
