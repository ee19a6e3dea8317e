"""Group commit: concurrent writes share transactions, each caller returns once its row is stored,
and a bad row fails only its own caller. On SQLite and on PostgreSQL (127.0.0.1:5432)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from sqlalchemy import Column, Integer, MetaData, String, Table, event, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from ranch.db.engine import open_engine
from ranch.db.group_commit import CommitGroup, GroupWriter

metadata = MetaData()
notes = Table(
    "notes",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("text", String(20), nullable=False),
)


@contextlib.asynccontextmanager
async def _writing(url: str) -> AsyncIterator[tuple[AsyncEngine, GroupWriter, list[int]]]:
    """A fresh `notes` table, a writer for it, and a list that grows by one per commit."""
    engine = open_engine(url)
    try:
        async with engine.begin() as connection:
            await connection.run_sync(metadata.create_all)
        commits: list[int] = []
        event.listen(engine.sync_engine, "commit", lambda _connection: commits.append(1))
        async with CommitGroup(engine) as group:  # entered, as the hub's lifespan enters it
            yield engine, GroupWriter(engine, insert(notes), group=group), commits
    finally:
        await engine.dispose()


async def _stored(engine: AsyncEngine) -> dict[int, str]:
    async with engine.connect() as connection:
        return {row.id: row.text for row in await connection.execute(select(notes))}


def test_concurrent_writes_share_transactions_and_are_stored_when_they_return(database_url: str) -> None:
    async def scenario() -> None:
        async with _writing(database_url) as (engine, writer, commits):
            seen_on_return: list[bool] = []

            async def write(number: int) -> None:
                await writer.write({"id": number, "text": f"note {number}"})
                seen_on_return.append(number in await _stored(engine))

            await asyncio.gather(*(write(number) for number in range(200)))
            assert await _stored(engine) == {number: f"note {number}" for number in range(200)}
            assert all(seen_on_return) and len(seen_on_return) == 200
            assert 1 <= len(commits) < 50, len(commits)  # 200 writes, a handful of transactions

    asyncio.run(scenario())


def test_a_bad_row_fails_only_its_own_caller(database_url: str) -> None:
    async def scenario() -> None:
        async with _writing(database_url) as (engine, writer, _commits):
            rows = [{"id": number, "text": f"note {number}"} for number in range(20)]
            rows[7] = {"id": 7, "text": None}  # NOT NULL: the database refuses this one
            results = await asyncio.gather(*(writer.write(row) for row in rows), return_exceptions=True)
            failed = [index for index, result in enumerate(results) if isinstance(result, Exception)]
            assert failed == [7], results
            assert sorted(await _stored(engine)) == [number for number in range(20) if number != 7]

    asyncio.run(scenario())


def test_a_cancelled_caller_does_not_strand_the_others(database_url: str) -> None:
    async def scenario() -> None:
        async with _writing(database_url) as (engine, writer, _commits):
            first = asyncio.ensure_future(writer.write({"id": 1, "text": "cancelled caller"}))
            others = [asyncio.ensure_future(writer.write({"id": n, "text": "waits"})) for n in range(2, 6)]
            await asyncio.sleep(0)
            first.cancel()
            await asyncio.wait_for(asyncio.gather(*others), timeout=10)
            assert {2, 3, 4, 5} <= set(await _stored(engine))

    asyncio.run(scenario())


def test_a_deferred_row_commits_with_the_next_write_of_its_group(database_url: str) -> None:
    """A team's conversation is deferred, then the task that ends the turn is written: one
    transaction holds both, and both are stored when the write returns."""

    async def scenario() -> None:
        async with _writing(database_url) as (engine, writer, commits):
            other = GroupWriter(engine, insert(notes), group=writer.group)  # another statement's view
            other.defer({"id": 1, "text": "conversation"})
            await writer.write({"id": 2, "text": "task"})
            assert await _stored(engine) == {1: "conversation", 2: "task"}
            assert len(commits) == 1

    asyncio.run(scenario())


def test_a_deferred_row_alone_commits_within_the_linger_or_when_settled(database_url: str) -> None:
    async def scenario() -> None:
        async with _writing(database_url) as (engine, writer, _commits):
            committed = asyncio.Event()
            event.listen(engine.sync_engine, "commit", lambda _connection: committed.set())
            writer.defer({"id": 1, "text": "alone"})
            await asyncio.wait_for(committed.wait(), timeout=5)  # the linger (50 ms) starts a commit
            await writer.group.settle()  # the commit event comes as the commit starts: let it end
            assert 1 in await _stored(engine)
            writer.defer({"id": 2, "text": "settled"})
            await writer.group.settle()
            assert 2 in await _stored(engine)

    asyncio.run(scenario())


def test_a_failing_deferred_row_does_not_fail_the_write_it_went_with(database_url: str) -> None:
    async def scenario() -> None:
        async with _writing(database_url) as (engine, writer, _commits):
            writer.defer({"id": 1, "text": None})  # NOT NULL: refused, logged, nobody waits on it
            await writer.write({"id": 2, "text": "task"})
            assert await _stored(engine) == {2: "task"}

    asyncio.run(scenario())


def test_rows_queued_when_the_group_is_closed_are_committed_first(database_url: str) -> None:
    """A hub stopping disposes its engine right after: what was deferred (a turn's conversation, which
    would otherwise go out within `linger`) is committed by `aclose`, and no flush is left running."""

    async def scenario() -> None:
        async with _writing(database_url) as (engine, writer, _commits):
            for number in range(3):
                writer.defer({"id": number, "text": f"late {number}"})
            await writer.group.aclose()
            assert writer.group._flushed is None  # no flush left running
            assert await _stored(engine) == {number: f"late {number}" for number in range(3)}

    asyncio.run(scenario())
