"""The hot reads use an index, never a scan of a table that grows with the work (issue 41).

Each read is the app's own: the statements are recorded as the app's code runs them (GetTask,
ListTasks with each filter and page token, the conversation read, the take-over loop's reads, a
room's message and event pages, the delivery claim), on tables already holding other owners' and
other rooms' rows, then planned again with `EXPLAIN QUERY PLAN` (SQLite, no statistics: as ranch
runs it) or `EXPLAIN (FORMAT JSON)` with `enable_seqscan` and `enable_sort` off after ANALYZE
(PostgreSQL: a plan that can only scan still scans, one that can only sort still sorts). A plan
fails when it reads a growing table whole (a table scan, or a walk of a whole index that is not a
partial one holding only the work in flight), or sorts the matches of a read served a page at a
time (ListTasks, a room's messages and events: the index gives the order, or every match is read).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from a2a.types import ListTasksRequest, Task, TaskState, TaskStatus
from sqlalchemy import event, insert, select, text
from sqlalchemy.engine import Engine
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, async_sessionmaker, create_async_engine
from sqlalchemy.pool import NullPool

from _support import databases
from _support.hubkit import ADMIN_KEY, Api, serve_ranch, wait_until
from ranch.config import RetentionConfig
from ranch.db.conversations import ConversationStore
from ranch.db.engine import open_engine
from ranch.db.models import (
    ApiKey,
    Delivery,
    Execution,
    Organization,
    Room,
    RoomEvent,
    RoomMessage,
    member_sessions,
    push_outbox,
    ranch_tasks,
    team_conversations,
)
from ranch.db.replicas import Replicas
from ranch.retention.pruner import Pruner
from ranch.rooms import executions
from ranch.rooms.bus import Bus
from ranch.rooms.pages import event_page
from ranch.tasks.push import PushOutbox
from ranch.tasks.store import SqlTaskStore, owner_context, owner_of

pytestmark = pytest.mark.anyio

GROWING = {
    "ranch_tasks",
    "ranch_task_counts",
    "ranch_push_configs",
    "team_conversations",
    "member_sessions",
    "rooms",
    "participants",
    "messages",
    "events",
    "deliveries",
    "executions",
    "api_keys",
    "users",
}
"""Tables whose rows grow with conversations, tasks, rooms, events or keys. Not `replicas` (a row per
running process), `agents` and `organizations` (they follow the configuration), nor `push_outbox`:
its rows are the webhook updates in flight, each removed once sent, so the take-over's read of it
costs what is being sent, not what ever was."""
ORDERED = {"ranch_tasks", "messages", "events", "executions"}
"""Tables read a page at a time (or the newest row) in an index's order: a sort means every match was
read first."""
PARTIAL = {"ranch_tasks_runner"}
"""Indexes of the work in flight only: walking one whole costs what is running, not what is stored."""
TASKS = 3000
ROOMS = 20
PER_ROOM = 100
OWNER = "desk/alice"
CONTEXT = "ctx-8"
STATES = ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_WORKING", "TASK_STATE_CANCELED"]


# -- recording what runs, and planning it again ---------------------------------------------------

Recorded = list[tuple[str, Any]]


@contextmanager
def recording() -> Iterator[Recorded]:
    """Every read, update and delete any engine of this process runs (the served hub's included)."""
    statements: Recorded = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, many: bool) -> None:
        verb = statement.lstrip().split(None, 1)[0].upper()
        if not many and verb in ("SELECT", "UPDATE", "DELETE", "WITH"):
            statements.append((statement, parameters))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield statements
    finally:
        event.remove(Engine, "before_cursor_execute", record)


async def recorded(action: Callable[[], Awaitable[Any]]) -> Recorded:
    with recording() as statements:
        await action()
    assert statements, "the action ran no statement"
    return statements


async def scans(engine: AsyncEngine, statements: Recorded) -> list[str]:
    """Each statement's plan steps that read a growing table whole, or sort every match of an
    ordered one, with the statement."""
    found: list[str] = []
    postgres = engine.dialect.name == "postgresql"
    async with engine.connect() as connection:
        if postgres:  # only a statement that has no other way scans or sorts
            await connection.exec_driver_sql("SET enable_seqscan = off")
            await connection.exec_driver_sql("SET enable_sort = off")
        for statement, parameters in _unique(statements):
            if postgres:
                rows = await connection.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}", parameters)
                plan = rows.scalar_one()
                steps = _postgres_scans(json.loads(plan) if isinstance(plan, str) else plan)
            else:
                rows = await connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
                steps = _sqlite_scans([row[-1] for row in rows], statement)
            found += [f"{step}  <-  {' '.join(statement.split())[:300]}" for step in steps]
    return found


def _unique(statements: Recorded) -> Recorded:
    seen: dict[str, Any] = {}
    for statement, parameters in statements:
        seen.setdefault(statement, parameters)
    return list(seen.items())


SQLITE_SCAN = re.compile(r"^SCAN (\w+)(?: USING (?:COVERING )?INDEX (\w+))?")


def _sqlite_scans(details: list[str], statement: str) -> list[str]:
    steps = []
    for detail in details:
        match = SQLITE_SCAN.match(detail)
        if match is not None:
            table, index = re.sub(r"_\d+$", "", match.group(1)), match.group(2)
            if table in GROWING and index not in PARTIAL:
                steps.append(detail)
        elif detail.startswith("USE TEMP B-TREE FOR ORDER BY") and _reads(statement) in ORDERED:
            steps.append(detail)
    return steps


def _reads(statement: str) -> str | None:
    """The table a statement reads first (after its first FROM)."""
    match = re.search(r"\bFROM (\w+)", statement)
    return match.group(1) if match else None


def _postgres_scans(plans: list[dict[str, Any]]) -> list[str]:
    steps = []
    nodes = [plan["Plan"] for plan in plans]
    while nodes:
        node = nodes.pop()
        nodes += node.get("Plans", [])
        kind, table, index = node["Node Type"], node.get("Relation Name"), node.get("Index Name")
        if kind == "Seq Scan" and table in GROWING:
            steps.append(f"Seq Scan on {table}")
        elif "Index" in kind and "Index Cond" not in node and index not in PARTIAL:
            if (table or _table_of(index)) in GROWING:
                steps.append(f"{kind} using {index} (the whole index)")
        elif kind in ("Sort", "Incremental Sort") and _tables_under(node) & ORDERED:
            steps.append(f"{kind} by {node.get('Sort Key')}")
    return steps


def _tables_under(node: dict[str, Any]) -> set[str]:
    tables = {node["Relation Name"]} if "Relation Name" in node else set()
    for child in node.get("Plans", []):
        tables |= _tables_under(child)
    return tables


def _table_of(index: str | None) -> str | None:
    for table in ranch_tasks.metadata.tables.values():
        if any(each.name == index for each in table.indexes) or index == f"{table.name}_pkey":
            return table.name
    return None


# -- tables holding other owners' and other rooms' rows -----------------------------------------------


def task(index: int, owner: str, driven: bool) -> dict[str, Any]:
    state = STATES[index // 4 % len(STATES)]  # every owner has tasks in every state
    stamp = None if index % 50 == 0 else 1_700_000_000_000_000_000 + index * 1000
    body = Task(id=f"t{index:05d}", context_id=f"ctx-{index % 300}", status=TaskStatus(state=state))
    runner = "gone-replica" if driven and state == "TASK_STATE_WORKING" and index % 7 == 0 else None
    return {
        "id": body.id,
        "owner": owner,
        "context_id": body.context_id,
        "state": state,
        "updated_ns": stamp,
        "body": body.SerializeToString(),
        "runner": runner,
    }


async def fill(engine: AsyncEngine, *, gone: bool = True) -> None:
    """Tasks of several owners, team conversations, and rooms with their messages, events, executions
    and (handled) deliveries: each hot read below finds its rows among many that are not. `gone`:
    some tasks and push updates are held by replicas that are gone (for the take-over's reads)."""
    owners = [OWNER, "desk/bob", "desk/carol", "room/x"]
    conversations = [
        {"team_id": "desk", "owner": owners[i % 4], "context_id": f"ctx-{i}", "version": 1, "state": {}}
        for i in range(1000)
    ]
    sessions = [
        {"agent_id": "peer", "owner": owners[i % 4], "context_id": f"ctx-{i}", "remote_context_id": "r"}
        for i in range(1000)
    ]
    async with engine.begin() as connection:
        await connection.execute(insert(ranch_tasks), [task(i, owners[i % 4], gone) for i in range(TASKS)])
        await connection.execute(insert(team_conversations), conversations)
        await connection.execute(insert(member_sessions), sessions)
        if gone:
            held = [{"task_id": f"t{i}", "runner": "gone-replica", "body": b"x"} for i in range(200)]
            await connection.execute(insert(push_outbox), held)
        await connection.execute(insert(Organization), [{"id": "filler", "name": "Filler"}])
        for number in range(ROOMS):
            await fill_room(connection, f"filler-{number}")
    if engine.dialect.name == "postgresql":  # what autovacuum would have done by now
        async with engine.execution_options(isolation_level="AUTOCOMMIT").connect() as connection:
            await connection.execute(text("ANALYZE"))


async def fill_room(connection: AsyncConnection, room: str) -> None:
    await connection.execute(insert(Room), [{"id": room, "org_id": "filler", "last_event": PER_ROOM}])
    await connection.execute(
        insert(RoomMessage),
        [
            {"id": f"{room}-{n}", "room_id": room, "sender_kind": "user", "sender_id": "u"}
            for n in range(PER_ROOM)
        ],
    )
    seqs = (await connection.scalars(select(RoomMessage.seq).where(RoomMessage.room_id == room))).all()
    await connection.execute(
        insert(RoomEvent),
        [
            {"room_id": room, "cursor": n + 1, "type": "message.created", "data": {"n": n}}
            for n in range(PER_ROOM)
        ],
    )
    await connection.execute(
        insert(Delivery),
        [
            {
                "id": f"{room}-{seq}",
                "message_seq": seq,
                "room_id": room,
                "agent_id": "greeter",
                "status": "done",
            }
            for seq in seqs
        ],
    )
    await connection.execute(
        insert(Execution),
        [
            {"id": f"e{room}-{n}", "room_id": room, "agent_id": "greeter", "status": "completed"}
            for n in range(5)
        ],
    )


@pytest.fixture
async def filled(database_url: str) -> Any:
    engine = open_engine(database_url)
    await fill(engine)
    yield engine
    await engine.dispose()


# -- the reads ----------------------------------------------------------------------------------------


async def test_get_task_and_list_tasks_with_each_filter_and_page_use_an_index(filled: AsyncEngine) -> None:
    store = SqlTaskStore(filled, owner_of)
    mine = owner_context(OWNER)
    requests = [
        ListTasksRequest(),
        ListTasksRequest(status=TaskState.TASK_STATE_FAILED),
        ListTasksRequest(context_id=CONTEXT, page_size=2),  # more than a page: counted
        ListTasksRequest(context_id=CONTEXT, status=TaskState.TASK_STATE_COMPLETED, page_size=1),
    ]
    after = ListTasksRequest()
    after.status_timestamp_after.FromNanoseconds(1_700_000_000_000_000_000 + (TASKS - 400) * 1000)
    requests.append(after)

    async def reads() -> None:
        assert await store.get("t00004", mine) is not None
        for request in requests:
            first = await store.list(request, mine)
            assert first.tasks and first.total_size
        for state in (None, TaskState.TASK_STATE_COMPLETED):  # running tasks left out: counted by id
            listed, total = await store.page(ListTasksRequest(page_size=2, status=state), mine, ("t00004",))
            assert listed and total
        page = await store.list(ListTasksRequest(page_size=10), mine)
        for _ in range(3):  # a page further on, then past the last timed task into the untimed ones
            page = await store.list(ListTasksRequest(page_size=10, page_token=page.next_page_token), mine)
        walk = ListTasksRequest(page_size=700)
        while (page := await store.list(walk, mine)).next_page_token:
            walk = ListTasksRequest(page_size=700, page_token=page.next_page_token)
        assert not page.tasks[-1].status.HasField("timestamp")  # the walk ended among the untimed

    assert await scans(filled, await recorded(reads)) == []


async def test_the_conversation_read_and_the_member_session_read_use_an_index(filled: AsyncEngine) -> None:
    store = ConversationStore(filled, shared=True)

    async def reads() -> None:
        assert await store.version("desk", OWNER, "ctx-4") == 1
        assert await store.load("desk", OWNER, "ctx-4") is not None
        assert await store.session("peer", OWNER, "ctx-4") is not None

    assert await scans(filled, await recorded(reads)) == []


async def test_the_take_over_rounds_reads_use_an_index(filled: AsyncEngine) -> None:
    """What `Hub._take_over` reads every half lease, even on one process with nothing to take."""
    replicas = Replicas(filled)
    bus = Bus(async_sessionmaker(filled, expire_on_commit=False))
    store = SqlTaskStore(filled, owner_of)
    outbox = PushOutbox(filled, replicas.id)
    left_running: list[Any] = []

    async def round_() -> None:
        alive = await replicas.alive()
        await outbox.take_over(alive)
        left_running.extend(await store.orphaned(["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"], alive))
        async with bus.transaction() as tx:
            await executions.recover(tx, alive, replicas.id)

    assert await scans(filled, await recorded(round_)) == []
    assert left_running and {runner for _, _, runner in left_running} == {"gone-replica"}


async def test_a_posts_read_of_its_agents_open_execution_reads_no_ended_one(filled: AsyncEngine) -> None:
    """What each post that wakes an agent reads (`executions.current`): in a room where the agent has
    ended many executions, the open one comes from the index of the open ones, unsorted."""
    ended = [
        {"id": f"ended-{n}", "room_id": "filler-0", "agent_id": "greeter", "status": "completed"}
        for n in range(300)
    ]
    async with filled.begin() as connection:
        await connection.execute(insert(Execution), ended)
        await connection.execute(
            insert(Execution),
            [{"id": "open", "room_id": "filler-0", "agent_id": "greeter", "status": "working"}],
        )
    if filled.dialect.name == "postgresql":
        async with filled.execution_options(isolation_level="AUTOCOMMIT").connect() as connection:
            await connection.execute(text("ANALYZE"))
    bus = Bus(async_sessionmaker(filled, expire_on_commit=False))

    async def read() -> None:
        async with bus.transaction("filler-0") as tx:
            assert (await executions.current(tx, "filler-0", "greeter")).id == "open"

    assert await scans(filled, await recorded(read)) == []


ROOM_CONFIG = """
agents:
  - id: greeter
    kind: rules
    rules: [{reply: "Hello: {text}"}]
"""


def test_room_pages_and_the_delivery_claim_use_an_index(database_url: str) -> None:
    """A room among others, served: posts that wake an agent (each claimed, in order), the room's
    message and event pages (after a cursor, before one), and a WebSocket-style replay page."""
    engine = create_async_engine(database_url, poolclass=NullPool)  # used from several event loops
    anyio.run(lambda: fill(engine, gone=False))
    with serve_ranch(ROOM_CONFIG, database_url, caller_rate=None) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = admin.post("/rooms", {"title": "Ops", "participants": [{"kind": "agent", "id": "greeter"}]})[
            "id"
        ]
        with recording() as statements:
            for n in range(3):
                admin.post(f"/rooms/{room}/messages", {"text": f"@greeter hello {n}"})
            wait_until(
                lambda: sum(m["sender"]["id"] == "greeter" for m in admin.messages(room)) == 3,
                what="three replies",
            )
            newest = admin.get(f"/rooms/{room}/messages", limit=2)
            admin.get(f"/rooms/{room}/messages", since=1, limit=2)
            admin.get(f"/rooms/{room}/messages", before=newest["items"][-1]["cursor"], limit=2)
            admin.get(f"/rooms/{room}/events", since=2, limit=3)
            admin.get(f"/rooms/{room}/events", before=4, limit=3)

            async def replay() -> None:
                async with async_sessionmaker(engine)() as session:
                    rows, _more = await event_page(session, room, 1)
                    assert rows

            anyio.run(replay)
        found = anyio.run(scans, engine, statements)
    assert found == []


async def test_each_prune_reads_and_deletes_on_an_index(filled: AsyncEngine) -> None:
    """Retention's counts (`--dry-run`), batch reads and deletes, for every lifetime, with a tenth of
    the rows past it among the rest: a round costs the rows it deletes, not the rows kept."""
    async with filled.begin() as connection:
        await connection.execute(insert(ApiKey), [dead_or_live_key(n) for n in range(300)])
        for table, column, which in (
            ("messages", "created_at", "seq % 10 = 1"),
            ("events", "created_at", "seq % 10 = 1"),
            ("push_outbox", "created_at", "seq % 10 = 1"),
            ("team_conversations", "updated_at", "context_id LIKE '%1'"),
            ("member_sessions", "updated_at", "context_id LIKE '%1'"),
        ):  # a tenth of each, long ago
            await connection.execute(text(f"UPDATE {table} SET {column} = 1.0 WHERE {which}"))
    if filled.dialect.name == "postgresql":
        async with filled.execution_options(isolation_level="AUTOCOMMIT").connect() as connection:
            await connection.execute(text("ANALYZE"))
    every = RetentionConfig(
        tasks="1d", events="1d", messages="1d", conversations="1d", push_outbox="1d", keys="1d", batch=50
    )
    # a day after the tasks' first tenth: their status times are 1 µs apart from 1_700_000_000 s on
    pruner = Pruner(filled, every, clock=lambda: 1_700_000_000 + 86400 + TASKS * 1e-7)

    async def prune() -> None:
        counted = await pruner.run(dry_run=True)
        assert all(counted.counts.values()), counted.counts
        assert (await pruner.run()).counts == counted.counts

    assert await scans(filled, await recorded(prune)) == []


def dead_or_live_key(n: int) -> dict[str, Any]:
    """Keys of a few people: one in ten revoked long ago, one in ten expired long ago."""
    return {
        "id": f"k{n}",
        "digest": f"k{n}",
        "prefix": "rk_",
        "org_id": "filler",
        "owner_kind": "user",
        "owner_id": f"u{n % 7}",
        "revoked": n % 10 == 0,
        "revoked_at": 1.0 if n % 10 == 0 else None,
        "expires_at": 2.0 if n % 10 == 1 else None if n % 2 else 4e9,
    }


# -- the work of a replay page, counted in SQLite's own steps ----------------------------------------


def test_a_replay_page_costs_the_same_in_a_long_room_as_in_a_short_one(tmp_path: Path) -> None:
    """A WebSocket replay reads a room's events a page at a time up to the cursor it subscribed at
    (`upto`). Its page of 10 events from the room's start must cost the same in a room of 5,000
    events as in one of 50: SQLite's virtual machine steps, counted by a progress handler while the
    page's recorded statements run again, not time. (An index range bounded by `upto` instead of the
    page's own last cursor read and filtered every event up to the room's newest.)"""
    steps = {events: _replay_page_steps(tmp_path / f"{events}.db", events) for events in (50, 5000)}
    assert steps[5000] <= 2 * steps[50], steps


def _replay_page_steps(path: Path, events: int) -> int:
    url = f"sqlite+aiosqlite:///{databases.migrated_sqlite(path)}"
    engine = create_async_engine(url, poolclass=NullPool)

    async def page() -> Recorded:
        async with engine.begin() as connection:
            await connection.execute(insert(Organization), [{"id": "filler", "name": "Filler"}])
            await connection.execute(insert(Room), [{"id": "long", "org_id": "filler", "last_event": events}])
            rows = [{"room_id": "long", "cursor": n + 1, "type": "t", "data": {}} for n in range(events)]
            await connection.execute(insert(RoomEvent), rows)
        with recording() as statements:
            async with async_sessionmaker(engine)() as session:
                found, _more = await event_page(session, "long", 0, upto=events, rows=10)
        assert len(found) == 10
        await engine.dispose()
        return statements

    statements = anyio.run(page)
    counted = 0

    def step() -> int:
        nonlocal counted
        counted += 1
        return 0

    with sqlite3.connect(path) as connection:
        connection.set_progress_handler(step, 10)
        for statement, parameters in statements:
            connection.execute(statement, parameters).fetchall()
    return counted
