"""ranch's SqlTaskStore answers what the a2a-sdk's DatabaseTaskStore answers.

The same hypothesis-generated tasks (owners, contexts, states, timestamps) are
saved into both stores, on SQLite files; then every get and a series of ListTasks
pages (filters, page sizes, page tokens) must return the same tasks in the same
order. Bounded: 40 examples.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks.database_task_store import DatabaseTaskStore
from a2a.types import ListTasksRequest, Message, Part, Role, Task, TaskState, TaskStatus
from a2a.utils.task import ListTasksCursor, encode_list_tasks_cursor
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy.ext.asyncio import create_async_engine

from _support import databases
from _support.fuzzkit import fuzzing
from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.tasks.store import SqlTaskStore, owner_of

pytestmark = pytest.mark.anyio

STATES = [TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_COMPLETED, TaskState.TASK_STATE_FAILED]


def ctx(owner: str) -> ServerCallContext:
    return ServerCallContext(state={"ranch.owner": owner})


@st.composite
def task_sets(draw: st.DrawFn) -> list[tuple[str, Task]]:
    count = draw(st.integers(1, 12))
    stamps = draw(st.lists(st.integers(1, 10**6), min_size=count, max_size=count, unique=True))
    saved = []
    for index, stamp in enumerate(stamps):
        status = TaskStatus(state=draw(st.sampled_from(STATES)))
        if draw(st.integers(0, 5)):  # mostly timed; sometimes not, which sorts last
            status.timestamp.FromMicroseconds(1_700_000_000_000_000 + stamp)
        text = draw(st.text(max_size=8))
        status.message.CopyFrom(
            Message(message_id=f"m{index}", role=Role.ROLE_AGENT, parts=[Part(text=text)])
        )
        task = Task(id=f"t{index:02d}", context_id=draw(st.sampled_from(["c1", "c2"])), status=status)
        if draw(st.booleans()):
            task.metadata.update({"k": text})
        saved.append((draw(st.sampled_from(["a/", "b/"])), task))
    return saved


async def compare(folder: Path, saved: list[tuple[str, Task]], queries: list[dict[str, Any]]) -> None:
    ours_db = databases.migrated_sqlite(folder / "ours.db")  # a copy of the migrated template
    ours_engine = create_async_engine(f"sqlite+aiosqlite:///{ours_db}")
    sdk_engine = create_async_engine(f"sqlite+aiosqlite:///{folder / 'sdk.db'}")
    ours = SqlTaskStore(ours_engine, owner_of)
    sdk = DatabaseTaskStore(sdk_engine, owner_resolver=owner_of)
    await sdk.initialize()
    try:
        for owner, task in saved:
            await ours.save(task, ctx(owner))
            await sdk.save(task, ctx(owner))
        for owner in ("a/", "b/"):
            for _, task in saved:
                assert await ours.get(task.id, ctx(owner)) == await sdk.get(task.id, ctx(owner))
            for query in queries:
                request = ListTasksRequest(**query)
                mine, theirs = await ours.list(request, ctx(owner)), await sdk.list(request, ctx(owner))
                pages = 0
                while True:
                    assert [t.id for t in mine.tasks] == [t.id for t in theirs.tasks], query
                    assert list(mine.tasks) == list(theirs.tasks)
                    assert (mine.total_size, mine.page_size) == (theirs.total_size, theirs.page_size)
                    assert bool(mine.next_page_token) == bool(theirs.next_page_token)
                    pages += 1
                    if not mine.next_page_token or pages > 20:
                        break
                    mine = await ours.list(
                        ListTasksRequest(**query, page_token=mine.next_page_token), ctx(owner)
                    )
                    theirs = await sdk.list(
                        ListTasksRequest(**query, page_token=theirs.next_page_token), ctx(owner)
                    )
    finally:
        await ours_engine.dispose()
        await sdk_engine.dispose()


QUERIES: list[dict[str, Any]] = [
    {},
    {"page_size": 3},
    {"context_id": "c1", "page_size": 2},
    {"status": TaskState.TASK_STATE_COMPLETED},
    {"status": TaskState.TASK_STATE_WORKING, "page_size": 1},
]


@fuzzing(20)
@given(task_sets())
def test_sql_task_store_answers_as_the_sdk_database_store(
    tmp_path_factory: Any, saved: list[tuple[str, Task]]
) -> None:
    folder = Path(tmp_path_factory.mktemp("stores"))
    anyio.run(compare, folder, saved, QUERIES)


def test_a_task_id_keeps_its_first_owner(tmp_path: Path) -> None:
    """Another owner saving a task with the same id neither overwrites nor reads it."""

    async def scenario() -> None:
        engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
        store = SqlTaskStore(engine, owner_of)
        await migrate.upgrade(engine)
        mine = Task(id="t", context_id="c", status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
        other = Task(id="t", context_id="x", status=TaskStatus(state=TaskState.TASK_STATE_FAILED))
        await store.save(mine, ctx("a/"))
        await store.save(other, ctx("b/"))
        assert await store.get("t", ctx("a/")) == mine
        assert await store.get("t", ctx("b/")) is None
        await engine.dispose()

    anyio.run(scenario)


def listing_order(task: Task) -> tuple[bool, int, str]:
    """ListTasks' order (A2A; the SDK's `ListTasksCursor.sort_key`), descending: timed tasks newest
    first, ties by id, the untimed ones last."""
    timed = task.status.HasField("timestamp")
    return (timed, task.status.timestamp.ToNanoseconds() if timed else 0, task.id)


async def test_pages_walk_every_task_once_in_order_on_each_database(database_url: str) -> None:
    """Keyset pages over tasks that share timestamps and tasks with none, on SQLite and PostgreSQL
    (which sorts NULL first where SQLite sorts it last): each task once, in ListTasks order, and
    `totalSize` counts them all on every page; a token made by the SDK's own encoder is taken."""
    engine = open_engine(database_url)
    store = SqlTaskStore(engine, owner_of)
    saved = []
    for index in range(23):
        status = TaskStatus(state=STATES[index % 3])
        if index % 5:  # every fifth has no timestamp; the others share four
            status.timestamp.FromSeconds(1_700_000_000 + index % 4)
        saved.append(Task(id=f"t{index:02d}", context_id="c", status=status))
    for task in saved:
        await store.save(task, ctx("a/"))
    await store.save(Task(id="other", context_id="c", status=saved[1].status), ctx("b/"))
    expected = sorted(saved, key=listing_order, reverse=True)

    for state, wanted in (
        (None, expected),
        (STATES[1], [task for task in expected if task.status.state == STATES[1]]),
    ):
        walked: list[str] = []
        page = await store.list(ListTasksRequest(page_size=4, status=state), ctx("a/"))
        for _ in range(20):
            assert page.total_size == len(wanted)
            walked += [task.id for task in page.tasks]
            if not page.next_page_token:
                break
            request = ListTasksRequest(page_size=4, page_token=page.next_page_token, status=state)
            page = await store.list(request, ctx("a/"))
        assert walked == [task.id for task in wanted], state

    last_timed = [task for task in expected if task.status.HasField("timestamp")][-1]
    token = encode_list_tasks_cursor(
        ListTasksCursor(last_timed.status.timestamp.ToNanoseconds(), last_timed.id)
    )
    after = await store.list(ListTasksRequest(page_size=50, page_token=token), ctx("a/"))
    assert [task.id for task in after.tasks] == [
        task.id for task in expected if not task.status.HasField("timestamp")
    ]
    await engine.dispose()
