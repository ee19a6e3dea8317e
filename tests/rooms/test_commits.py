"""Posts into a busy room share its transactions (rooms/commits.py), and their callers see nothing
else change: each write returns once it is committed, the room's events keep the order the writes
came in, one write's refusal or failure is its own, and each runs in its caller's context.

The writes are the room's own (a transaction of the room, events through the bus), on SQLite and on
PostgreSQL; the room is kept busy by a transaction of it held open, as a long write holds it.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
import pytest
from anyio.abc import TaskGroup
from sqlalchemy import event, insert, select
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker

from ranch.db.engine import open_engine
from ranch.db.models import Organization, Room, RoomEvent, RoomMessage
from ranch.exceptions import NotFound
from ranch.rooms.bus import Bus, NewEvent, NewMessage, Tx
from ranch.rooms.commits import Ahead, RoomCommits

pytestmark = pytest.mark.anyio

ROOM = "busy"
OTHERS = ("east", "west")
CALLER: contextvars.ContextVar[str] = contextvars.ContextVar("caller", default="")


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    engine = open_engine(database_url)
    async with engine.begin() as connection:
        await connection.execute(insert(Organization).values(id="acme", name="Acme"))
        for room in (ROOM, *OTHERS):
            await connection.execute(insert(Room).values(id=room, org_id="acme"))
    yield engine
    await engine.dispose()


@pytest.fixture
def bus(engine: AsyncEngine) -> Bus:
    return Bus(
        async_sessionmaker(engine, expire_on_commit=False), postgres=engine.dialect.name == "postgresql"
    )


@pytest.fixture
async def group() -> AsyncIterator[TaskGroup]:
    """Where the batches run, as the app's task group holds them; cancelled at the test's end."""
    async with anyio.create_task_group() as group:
        yield group
        group.cancel_scope.cancel()


class Notes:
    """Writes that each emit one event saying its text, recording the transaction they ran in."""

    def __init__(self, commits: RoomCommits) -> None:
        self.commits = commits
        self.seen: dict[str, Tx] = {}
        """Text -> the transaction its `apply` ran in (the last one, after a retry)."""
        self.contexts: dict[str, str] = {}

    async def check(self, tx: Tx) -> None:
        return None

    def apply(self, text: str, room: str = ROOM) -> Callable[[Tx, None], Awaitable[NewEvent]]:
        async def apply(tx: Tx, _checked: None) -> NewEvent:
            self.seen[text] = tx
            self.contexts[text] = CALLER.get()
            return await tx.emit(room, "note", {"text": text})

        return apply

    async def say(self, text: str, room: str = ROOM) -> NewEvent:
        return await self.commits.write(room, self.check, self.apply(text, room))


@asynccontextmanager
async def held(bus: Bus) -> AsyncIterator[Callable[[], None]]:
    """The room busy with a transaction of its own until the returned function is called."""
    inside, release = anyio.Event(), anyio.Event()

    async def hold() -> None:
        async with bus.transaction(ROOM):
            inside.set()
            await release.wait()

    async with anyio.create_task_group() as group:
        group.start_soon(hold)
        await inside.wait()
        yield release.set
        release.set()


async def stored(engine: AsyncEngine, room: str = ROOM) -> list[tuple[int, str]]:
    """The room's events as committed: (cursor, text), in cursor order."""
    async with engine.connect() as connection:
        rows = await connection.execute(
            select(RoomEvent.cursor, RoomEvent.data)
            .where(RoomEvent.room_id == room)
            .order_by(RoomEvent.cursor)
        )
        return [(row.cursor, row.data["text"]) for row in rows.all()]


async def test_writes_queued_while_the_room_is_busy_share_one_transaction_in_the_order_they_came(
    engine: AsyncEngine, bus: Bus, group: TaskGroup
) -> None:
    notes = Notes(RoomCommits(bus, group))
    texts = [f"n{index}" for index in range(6)]
    events: dict[str, NewEvent] = {}

    async def say(text: str) -> None:
        events[text] = await notes.say(text)

    async with held(bus) as release, anyio.create_task_group() as group:
        for text in texts:
            group.start_soon(say, text)
        await anyio.wait_all_tasks_blocked()  # every write queued behind the held room
        assert events == {}
        release()
    assert len({id(notes.seen[text]) for text in texts}) == 1
    assert [events[text].cursor for text in texts] == [1, 2, 3, 4, 5, 6]
    assert await stored(engine) == list(enumerate(texts, start=1))


async def test_a_write_refused_by_its_check_fails_alone_and_takes_no_cursor(
    engine: AsyncEngine, bus: Bus, group: TaskGroup
) -> None:
    notes = Notes(RoomCommits(bus, group))
    outcome: dict[str, Any] = {}

    async def refuse(tx: Tx) -> None:
        raise NotFound(f"no room '{ROOM}'", "room_id")

    async def say(text: str) -> None:
        try:
            if text == "refused":
                outcome[text] = await notes.commits.write(ROOM, refuse, notes.apply(text))
            else:
                outcome[text] = await notes.say(text)
        except NotFound as exc:
            outcome[text] = exc

    async with held(bus) as release, anyio.create_task_group() as group:
        for text in ("first", "before", "refused", "after"):
            group.start_soon(say, text)
        await anyio.wait_all_tasks_blocked()
        release()
    assert isinstance(outcome["refused"], NotFound)
    assert notes.seen["before"] is notes.seen["after"]  # no retry: the others' transaction went on
    assert await stored(engine) == [(1, "first"), (2, "before"), (3, "after")]


async def test_a_batch_failing_while_it_writes_is_written_again_one_write_at_a_time(
    engine: AsyncEngine, bus: Bus, group: TaskGroup
) -> None:
    notes = Notes(RoomCommits(bus, group))
    outcome: dict[str, Any] = {}

    async def broken(tx: Tx, _checked: None) -> NewEvent:
        await tx.emit(ROOM, "note", {"text": "broken"})  # written, then the write fails
        raise RuntimeError("the write broke")

    async def say(text: str) -> None:
        try:
            if text == "broken":
                outcome[text] = await notes.commits.write(ROOM, notes.check, broken)
            else:
                outcome[text] = await notes.say(text)
        except RuntimeError as exc:
            outcome[text] = exc

    async with held(bus) as release, anyio.create_task_group() as group:
        for text in ("first", "before", "broken", "after"):
            group.start_soon(say, text)
        await anyio.wait_all_tasks_blocked()
        release()
    assert str(outcome["broken"]) == "the write broke"
    assert notes.seen["before"] is not notes.seen["after"]  # each in a transaction of its own
    assert [outcome[text].cursor for text in ("first", "before", "after")] == [1, 2, 3]
    assert await stored(engine) == [(1, "first"), (2, "before"), (3, "after")]


async def test_each_write_runs_in_its_callers_context(bus: Bus, group: TaskGroup) -> None:
    notes = Notes(RoomCommits(bus, group))

    async def say(text: str) -> None:
        CALLER.set(f"caller of {text}")  # as a request's trace id is set for it
        await notes.say(text)

    async with held(bus) as release, anyio.create_task_group() as group:
        for text in ("a", "b", "c"):
            group.start_soon(say, text)
        await anyio.wait_all_tasks_blocked()
        release()
    assert notes.contexts == {text: f"caller of {text}" for text in ("a", "b", "c")}


async def test_a_write_whose_caller_left_before_its_batch_went_out_is_not_written(
    engine: AsyncEngine, bus: Bus, group: TaskGroup
) -> None:
    notes = Notes(RoomCommits(bus, group))
    leaving = anyio.CancelScope()

    async def left() -> None:
        with leaving:
            await notes.say("left")

    async with held(bus) as release, anyio.create_task_group() as group:
        group.start_soon(notes.say, "kept")
        await anyio.wait_all_tasks_blocked()  # its transaction waits for the room
        group.start_soon(left)
        group.start_soon(notes.say, "kept too")
        await anyio.wait_all_tasks_blocked()
        leaving.cancel()  # its caller is gone (a client that hung up) while it waits for the room
        await anyio.wait_all_tasks_blocked()
        release()
    assert await stored(engine) == [(1, "kept"), (2, "kept too")]


async def test_work_failing_after_the_commit_fails_its_own_write_and_nothing_is_written_twice(
    engine: AsyncEngine, bus: Bus, group: TaskGroup
) -> None:
    notes = Notes(RoomCommits(bus, group))
    outcome: dict[str, Any] = {}

    async def recorded_late(tx: Tx, _checked: None) -> NewEvent:
        async def fail() -> None:  # as an execution's task is recorded once the post is stored
            raise RuntimeError("recording failed")

        tx.later.append(fail)
        return await tx.emit(ROOM, "note", {"text": "recorded late"})

    async def woken_late(tx: Tx, _checked: None) -> NewEvent:
        def fail() -> None:  # as a worker is woken once the post is stored
            raise RuntimeError("waking failed")

        tx.after.append(fail)
        return await tx.emit(ROOM, "note", {"text": "woken late"})

    special = {"recorded late": recorded_late, "woken late": woken_late}

    async def say(text: str) -> None:
        try:
            if text in special:
                outcome[text] = await notes.commits.write(ROOM, notes.check, special[text])
            else:
                outcome[text] = await notes.say(text)
        except RuntimeError as exc:
            outcome[text] = exc

    texts = ["first", "before", "woken late", "recorded late", "after"]
    async with held(bus) as release, anyio.create_task_group() as group:
        for text in texts:
            group.start_soon(say, text)
        await anyio.wait_all_tasks_blocked()
        release()
    assert str(outcome["woken late"]) == "waking failed"
    assert str(outcome["recorded late"]) == "recording failed"
    assert [outcome[text].cursor for text in ("first", "before", "after")] == [1, 2, 5]
    assert await stored(engine) == list(enumerate(texts, start=1))


async def test_writes_queued_into_many_rooms_share_one_transaction_each_room_in_its_order(
    engine: AsyncEngine, bus: Bus, group: TaskGroup
) -> None:
    notes = Notes(RoomCommits(bus, group, lanes=1))
    inside, go_on = anyio.Event(), anyio.Event()

    async def slow(tx: Tx) -> None:  # the batch going out: the writes below queue behind it
        inside.set()
        await go_on.wait()

    queued = [(room, f"{room} {n}") for n in range(3) for room in (*OTHERS, ROOM)]
    async with anyio.create_task_group() as group:
        group.start_soon(notes.commits.write, ROOM, slow, notes.apply("first"))
        await inside.wait()
        for room, text in queued:
            group.start_soon(notes.say, text, room)
        await anyio.wait_all_tasks_blocked()
        go_on.set()
    assert len({id(notes.seen[text]) for _room, text in queued}) == 1
    assert notes.seen["first"] is not notes.seen[queued[0][1]]
    for room in OTHERS:
        assert await stored(engine, room) == [(n + 1, f"{room} {n}") for n in range(3)]
    assert await stored(engine) == [(1, "first"), *((n + 2, f"{ROOM} {n}") for n in range(3))]


async def test_a_room_another_writer_holds_is_left_out_of_a_batch_and_its_writes_follow_once_free(
    engine: AsyncEngine, bus: Bus, database_url: str, group: TaskGroup
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer: every room's writes wait for the one that holds it")
    notes = Notes(RoomCommits(bus, group))
    done: list[str] = []
    through = anyio.Event()

    async def say(text: str, room: str) -> None:
        await notes.say(text, room)
        done.append(text)
        if room != ROOM:
            through.set()

    async with held(bus) as release, anyio.create_task_group() as group:
        group.start_soon(say, "waits for its room", ROOM)
        group.start_soon(say, "goes through", OTHERS[0])
        with anyio.fail_after(10):  # the free room's write commits while the other is held
            await through.wait()
        group.start_soon(say, "after it", ROOM)
        await anyio.wait_all_tasks_blocked()
        assert done == ["goes through"]
        release()
    assert done[1:] == ["waits for its room", "after it"]
    assert await stored(engine) == [(1, "waits for its room"), (2, "after it")]
    assert await stored(engine, OTHERS[0]) == [(1, "goes through")]


async def test_a_read_writes_of_one_kind_share_is_made_once_for_their_batch_each_subject_in_each_room(
    bus: Bus, group: TaskGroup
) -> None:
    notes = Notes(RoomCommits(bus, group, lanes=1))
    reads: list[list[tuple[Any, str]]] = []

    async def read(tx: Tx, asked: list[tuple[Any, str]]) -> None:  # as people's seats in the batch's rooms
        reads.append(asked)

    inside, go_on = anyio.Event(), anyio.Event()

    async def slow(tx: Tx) -> None:
        inside.set()
        await go_on.wait()

    async with anyio.create_task_group() as group:
        first = partial(
            notes.commits.write, ROOM, slow, notes.apply("first"), ahead=Ahead("seats", read, "mia")
        )
        group.start_soon(first)
        await inside.wait()
        for n, (who, room) in enumerate(
            [("mia", OTHERS[0]), ("leo", OTHERS[0]), ("mia", OTHERS[1]), ("mia", OTHERS[0])]
        ):
            write = partial(notes.commits.write, room, notes.check, notes.apply(f"q{n}", room))
            group.start_soon(partial(write, ahead=Ahead("seats", read, who)))
        group.start_soon(
            partial(notes.commits.write, OTHERS[1], notes.check, notes.apply("alone", OTHERS[1]))
        )
        await anyio.wait_all_tasks_blocked()
        go_on.set()
    # the lone first write read nothing ahead; the batch once, each person in each of their rooms once
    assert reads == [[("mia", OTHERS[0]), ("leo", OTHERS[0]), ("mia", OTHERS[1])]]


async def test_held_messages_are_stored_in_one_insert_their_seqs_in_the_order_held(
    engine: AsyncEngine, bus: Bus
) -> None:
    """A batch of posts stores its messages with one statement, on SQLite as on PostgreSQL (asking
    SQLAlchemy for the rows' order made it send one INSERT a message on SQLite), and each message
    gets the seq of its own row."""
    inserts: list[str] = []

    def counted(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO MESSAGES"):
            inserts.append(statement)

    rooms = [ROOM, *OTHERS, ROOM, OTHERS[0], ROOM]
    held = [
        NewMessage(
            id=f"m{n}-{room}",
            room_id=room,
            type="text",
            sender_kind="user",
            sender_id="ann",
            text=f"{n}",
            parts=None,
            mentions=[],
            meta={},
            thread_id=None,
            execution_id=None,
            created_at=float(n),
        )
        for n, room in enumerate(rooms)
    ]
    event.listen(engine.sync_engine, "before_cursor_execute", counted)
    try:
        async with bus.transaction(None) as tx:
            for message in held:
                tx.hold(message)
            await tx.store_held()
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", counted)
    assert len(inserts) == 1
    async with engine.connect() as connection:
        rows = {mid: seq for mid, seq in await connection.execute(select(RoomMessage.id, RoomMessage.seq))}
    assert [message.seq for message in held] == [rows[message.id] for message in held]
    assert [message.seq for message in held] == sorted(message.seq for message in held)


async def test_a_batchs_events_go_on_from_each_rooms_count_in_one_statement(
    engine: AsyncEngine, bus: Bus
) -> None:
    """A batch numbers each room's events on from the room's count and stores them with the new
    counts: on PostgreSQL in one statement (the counts were read as the rooms were locked), on
    SQLite in two (SQLite counts on the rows inside the write)."""
    async with bus.batch([ROOM]) as tx:  # ROOM already has two events; the others none
        await tx.emit(ROOM, "note", {"text": "first"})
        await tx.emit(ROOM, "note", {"text": "second"})
    statements: list[str] = []

    def counted(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        statements.append(statement.split()[0].upper())

    event.listen(engine.sync_engine, "before_cursor_execute", counted)
    try:
        async with bus.batch([ROOM, *OTHERS]) as tx:
            assert tx.rooms == (frozenset([ROOM, *OTHERS]) if bus.parallel else None)  # None: any room
            emitted = [
                await tx.emit(room, "note", {"text": f"{n}"})
                for n, room in enumerate([OTHERS[0], ROOM, OTHERS[1], ROOM, OTHERS[0]])
            ]
    finally:
        event.remove(engine.sync_engine, "before_cursor_execute", counted)
    assert [(e.room_id, e.cursor) for e in emitted] == [
        (OTHERS[0], 1),
        (ROOM, 3),
        (OTHERS[1], 1),
        (ROOM, 4),
        (OTHERS[0], 2),
    ]
    if engine.dialect.name == "postgresql":
        assert statements == ["SELECT", "WITH"]  # the lock (with the counts), then events and counts
    else:
        assert statements == ["UPDATE", "INSERT"]
    async with engine.connect() as connection:
        stored = (await connection.execute(select(RoomEvent.room_id, RoomEvent.cursor, RoomEvent.data))).all()
        counts = dict((await connection.execute(select(Room.id, Room.last_event))).all())
    assert sorted((row.room_id, row.cursor, row.data["text"]) for row in stored) == sorted(
        [(ROOM, 1, "first"), (ROOM, 2, "second")]
        + [(e.room_id, e.cursor, e.shown()["text"]) for e in emitted]
    )
    assert counts == {ROOM: 4, OTHERS[0]: 2, OTHERS[1]: 1}
