"""Each room's ordered stream of events: written with the change, then handed out live.

Every change to a room (a message, an execution's status, a routing decision, a participant) is
written in the same transaction as its event row, in a transaction of that room
(`transaction(room_id)`). The event's `cursor` is the room's own: each room counts its events
(`rooms.last_event`), and the transaction locks the room's row while it works (on PostgreSQL, for
that room only: writes to other rooms, on this replica or another, go on), so a room's cursors grow
in commit order. A transaction that names no room writes no event and waits for no room.

After commit, the events go to the watchers of their room, here at once and on the other replicas
through the relay (rooms/relay.py). Each room this process's watchers follow has the cursor of the
last event handed out here; events that are not next (another replica's, or one committed here
while a page was read) make the room stale, and its events after that cursor are read back from the
table in bounded pages (rooms/pages.py), in order. A watcher too slow to keep up is closed and
reconnects with its cursors, losing nothing (rooms/watchers.py).

A subscription registers the watcher first, then learns the room's newest cursor handed out here
(or, for a room nobody here followed, its newest in the table, and reads the room once more: an
event committed meanwhile is not missed). Its backlog up to that cursor is replayed in pages,
outside any lock; replayed and live events are deduplicated by cursor (`accept`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import anyio
from anyio.abc import TaskStatus
from sqlalchemy import (
    JSON,
    BigInteger,
    Float,
    String,
    Table,
    Text,
    Update,
    bindparam,
    case,
    func,
    insert,
    literal,
    select,
    union_all,
    update,
)
from sqlalchemy import cast as sql_cast
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_sessionmaker

from ranch.db.engine import json_text
from ranch.db.models import Delivery, Execution, Room, RoomEvent, RoomMessage, iso, now
from ranch.exceptions import NotFound
from ranch.fanout import Fanout
from ranch.identity.principal import Principal
from ranch.rooms.locks import RoomLocks
from ranch.rooms.pages import event_page
from ranch.rooms.relay import Relay
from ranch.rooms.watchers import Outgoing, Watcher, encoded
from ranch.wire.errors import rest_error_body

logger = logging.getLogger(__name__)

RETRY = 1.0
"""Seconds before reading a room's events again when the database failed."""
COUNTED = 1000
"""Events of a room's backlog counted one by one for `subscribed`'s `replayed` (`Bus.backlog_size`)."""


LANES = 2
"""Batches of room writes going out at once where rooms are written in parallel (rooms/commits.py);
each holds a pooled connection. Two: one batch fills while the other goes out. More lanes make more,
smaller batches, and a transaction costs about 2 ms of CPU whatever it holds: a busy replica then
spends on transactions what it would spend on posts (bench/README.md "Rooms at scale": eight lanes
gave two replicas 1.3-1.7x one, two lanes 1.5-1.8x, and one process the same posts/s)."""
_LOCK_ROOM = (
    select(Room.id, Room.last_event).where(Room.id == bindparam("room")).with_for_update(key_share=True)
)
_LOCK_FREE_ROOMS = (
    select(Room.id, Room.last_event)
    .where(Room.id.in_(bindparam("rooms", expanding=True)))
    .order_by(Room.id)  # rows locked in one order by every writer: no deadlock between batches
    .with_for_update(key_share=True, skip_locked=True)
)
_COUNT_EVENTS = (
    update(Room)
    .where(Room.id == bindparam("room"))
    .values(last_event=Room.last_event + bindparam("count"))
    .returning(Room.last_event)
)
"""Statements built once: a room's are bound at each transaction, none is built per write."""


@functools.lru_cache(maxsize=256)
def _count_rooms(rooms: int) -> Update:
    """Count events of `rooms` rooms at once (`room0`, `count0`, ...): built once for each number
    of rooms, and compiled once (building the statement of each batch cost more than running it)."""
    named = [bindparam(f"room{n}", type_=Room.id.type) for n in range(rooms)]
    added = case(
        *(
            (Room.id == room, bindparam(f"count{n}", type_=Room.last_event.type))
            for n, room in enumerate(named)
        )
    )
    return (
        update(Room)
        .where(Room.id.in_(named))
        .values(last_event=Room.last_event + added)
        .returning(Room.id, Room.last_event)
    )


_INSERT_EVENTS = insert(cast(Table, RoomEvent.__table__))


def _count_and_store() -> Update:
    """PostgreSQL: insert a transaction's events and set their rooms' counts in one statement (one
    round trip fewer a transaction), the cursors numbered on from the counts read as the rooms were
    locked. The INSERT is a CTE of the UPDATE: PostgreSQL runs it though nothing reads it."""
    new = (
        func.unnest(
            bindparam("event_rooms", type_=ARRAY(String)),
            bindparam("event_cursors", type_=ARRAY(BigInteger)),
            bindparam("event_types", type_=ARRAY(String)),
            bindparam("event_data", type_=ARRAY(Text)),
            bindparam("event_times", type_=ARRAY(Float)),
        )
        .table_valued("room_id", "cursor", "type", "data", "created_at")
        .render_derived(name="new")
    )
    rows = select(new.c.room_id, new.c.cursor, new.c.type, sql_cast(new.c.data, JSON), new.c.created_at)
    stored = _INSERT_EVENTS.from_select(["room_id", "cursor", "type", "data", "created_at"], rows).cte(
        "stored"
    )
    counts = (
        func.unnest(
            bindparam("counted_rooms", type_=ARRAY(String)), bindparam("room_counts", type_=ARRAY(BigInteger))
        )
        .table_valued("id", "last_event")
        .render_derived(name="counts")
    )
    return update(Room).where(Room.id == counts.c.id).values(last_event=counts.c.last_event).add_cte(stored)


_COUNT_AND_STORE = _count_and_store()
_INSERT_MESSAGES = insert(cast(Table, RoomMessage.__table__)).returning(RoomMessage.id, RoomMessage.seq)
"""Each row's `seq` is read back by its message's id: asking for the rows' order instead
(`sort_by_parameter_order`) makes SQLite send one INSERT a message, having no sentinel to sort by."""


@dataclass(slots=True, eq=False)
class NewMessage:
    """A message a transaction writes, as its columns: stored by a plain INSERT, never through the
    session, so it needs no ORM object (building a `RoomMessage` cost about 30 µs, timeit on
    2026-11-28). Read like a stored row: the same attribute names (`rooms.views.MessageRow`)."""

    id: str
    room_id: str
    type: str
    sender_kind: str
    sender_id: str
    text: str
    parts: list[dict[str, Any]] | None
    mentions: list[str]
    meta: dict[str, Any]
    thread_id: str | None
    execution_id: str | None
    created_at: float
    seq: int = 0
    """Its place in the room, given by the INSERT."""

    def row(self) -> dict[str, Any]:
        """Its columns, as an INSERT takes them."""
        return {
            "id": self.id,
            "room_id": self.room_id,
            "type": self.type,
            "sender_kind": self.sender_kind,
            "sender_id": self.sender_id,
            "text": self.text,
            "parts": self.parts,
            "mentions": self.mentions,
            "metadata": self.meta,
            "thread_id": self.thread_id,
            "execution_id": self.execution_id,
            "created_at": self.created_at,
        }


@dataclass(eq=False)
class NewEvent:
    """An event a transaction writes: numbered and stored as it commits (`Bus.transaction`).

    `data` may be a function, called once the transaction's held messages are stored: a
    `message.created` event shows its message's `seq`, which only the INSERT gives."""

    room_id: str
    type: str
    data: dict[str, Any] | Callable[[], dict[str, Any]]
    created_at: float
    cursor: int = 0

    def shown(self) -> dict[str, Any]:
        """Its data (made now if it was a function)."""
        if callable(self.data):
            self.data = self.data()
        return self.data

    def row(self) -> dict[str, Any]:
        self.shown()
        return {
            "room_id": self.room_id,
            "cursor": self.cursor,
            "type": self.type,
            "data": self.data,
            "created_at": self.created_at,
        }


def frame(event: RoomEvent | NewEvent) -> dict[str, Any]:
    """The wire form of a stored event (WebSocket frame and `GET .../events` item)."""
    return {
        "type": event.type,
        "room_id": event.room_id,
        "cursor": event.cursor,
        "at": iso(event.created_at),
        "data": event.data,
    }


@dataclass
class Tx:
    """A write transaction of some rooms (or of none); `emit` records an event of one of them that
    goes out once it commits."""

    session: AsyncSession
    rooms: frozenset[str] | None = frozenset()
    """The rooms whose events it may write (it holds their locks); None: any room, where one lock
    orders every room's writes."""
    events: list[NewEvent] = field(default_factory=list)
    after: list[Callable[[], object]] = field(default_factory=list)
    """Run after commit, at once (waking a worker)."""
    later: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    """Awaited after commit, in order, before the transaction block returns (work that writes
    elsewhere, such as the task store: SQLite allows one writer at a time)."""
    deliveries: list[Delivery] = field(default_factory=list)
    """Deliveries this transaction created (the A2A gateway waits on its own)."""

    created: dict[str, NewEvent] = field(default_factory=dict)
    """Message id -> the `message.created` event of each message it wrote (its data, once committed,
    is the message as the API shows it)."""
    counts: dict[str, int] = field(default_factory=dict)
    """Room id -> its count of events as its row was locked (PostgreSQL), which its events go on from."""
    held: list[NewMessage] = field(default_factory=list)
    """Messages to store together in one INSERT (`hold`)."""
    ended: list[Execution] = field(default_factory=list)
    """Executions of a handoff it ended, told to `Bus.ended` after commit."""

    async def emit(
        self, room_id: str, type: str, data: dict[str, Any] | Callable[[], dict[str, Any]]
    ) -> NewEvent:
        if self.rooms is not None and room_id not in self.rooms:  # counted in a transaction of its room
            raise RuntimeError(f"an event of room {room_id!r} written in a transaction of {set(self.rooms)}")
        event = NewEvent(room_id, type, data, now())
        self.events.append(event)  # its cursor is counted as the transaction ends (`Bus.transaction`)
        return event

    def hold(self, message: NewMessage) -> None:
        """Store `message` with the transaction's other held messages, in one INSERT before the
        transaction commits (or before a message that cannot wait): a batch of posts
        (rooms/commits.py) costs one statement for its messages. Its `seq` is set then."""
        self.held.append(message)

    async def store_held(self) -> None:
        """Insert the held messages now, in the order they were held (their `seq`s grow in it)."""
        if not self.held:
            return
        held, self.held = self.held, []
        connection = await self.session.connection()  # a plain statement: no ORM machinery on the way
        result = await connection.execute(_INSERT_MESSAGES, [message.row() for message in held])
        seqs: dict[str, int] = {message_id: seq for message_id, seq in result}
        for message in held:
            message.seq = seqs[message.id]


class Bus:
    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        fanout: Fanout | None = None,
        origin: str = "",
        postgres: bool = False,
    ) -> None:
        self.sessions = sessions
        self._postgres = postgres
        self._locks = RoomLocks(per_room=postgres)
        self._watchers: set[Watcher] = set()
        self._followers: dict[str, set[Watcher]] = {}
        """Room id -> the watchers that follow it here."""
        self._agents: dict[str, set[Watcher]] = {}
        """Agent id -> its connections here (they get its deliveries)."""
        self._handed: dict[str, int] = {}
        """Room id -> the cursor of its last event handed out here (rooms followed here only)."""
        self._stale: set[str] = set()
        """Rooms whose events after `_handed` are to be read from the table."""
        self._wake = anyio.Event()
        self.ended: Callable[[Execution], Awaitable[None]] | None = None
        """Told after commit of each execution of a handoff a transaction ended (bound by the runtime
        to `RoomExecutions.ended`): a child's parent is woken, a parent's open child canceled."""
        self._relay = (
            Relay(fanout, origin, events=self._heard, deliver=self._fan_out, to_agent=self._to_own_agent)
            if fanout is not None and fanout.shared
            else None
        )

    async def relay(
        self,
        before_catch_up: Callable[[], Awaitable[None]] | None = None,
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        """Hand out events read back from the table (and, with replicas, share them) until cancelled;
        `before_catch_up` runs before the events missed during a fan-out gap are handed out."""
        async with anyio.create_task_group() as group:
            if self._relay is not None:
                self._relay.before_catch_up = before_catch_up
                await group.start(self._relay.run)
            task_status.started()
            await self._read_back()

    @property
    def parallel(self) -> bool:
        """Whether rooms are written in parallel (a lock per room), or one lock orders every room's
        writes (SQLite has one writer)."""
        return self._locks.per_room

    @property
    def lanes(self) -> int:
        """Batches of writes that may go out at once (rooms/commits.py): `LANES` where rooms are
        written in parallel, else one."""
        return LANES if self.parallel else 1

    @asynccontextmanager
    async def transaction(self, room_id: str | None = None) -> AsyncIterator[Tx]:
        """A write transaction of `room_id` (its events, in its order), or of no room (no events)."""
        rooms = () if room_id is None else (room_id,)
        async with self._locks.hold(room_id):
            async with self._written(rooms, wait=True) as tx:
                yield tx
        await self._after(tx)

    @asynccontextmanager
    async def batch(self, rooms: Sequence[str]) -> AsyncIterator[Tx]:
        """A write transaction of those of `rooms` no other writer holds now (`tx.rooms`): a room
        another transaction holds, here or on another replica, is left out rather than waited for.
        Where one lock orders every room, it waits for that lock and may write any room."""
        if not self.parallel:
            async with self._locks.hold(None):
                async with self._written((), wait=True) as tx:
                    tx.rooms = None
                    yield tx
            await self._after(tx)
            return
        async with self._locks.free_of(rooms) as free:
            async with self._written(free, wait=False) as tx:
                yield tx
        await self._after(tx)

    @asynccontextmanager
    async def _written(self, rooms: Sequence[str], *, wait: bool) -> AsyncIterator[Tx]:
        """A transaction holding `rooms`' rows on PostgreSQL (`wait`: one room, waited for; else those
        free now), its held messages stored and its events counted before it commits, and its events
        handed out once it has (still inside this process's locks of the rooms)."""
        async with self.sessions() as session, session.begin():
            connection = await session.connection()
            counts: dict[str, int] = {}
            if rooms and self._postgres:
                if wait:
                    found = await connection.execute(_LOCK_ROOM, {"room": rooms[0]})
                else:
                    found = await connection.execute(_LOCK_FREE_ROOMS, {"rooms": list(rooms)})
                counts = {row.id: row.last_event for row in found}
                if not wait:
                    rooms = [room for room in rooms if room in counts]
            tx = Tx(session, frozenset(rooms), counts=counts)
            yield tx
            await tx.store_held()
            counted = await self._count(connection, tx) if tx.events else {}
        if self._relay is not None and counted:
            self._relay.committed({room: events[-1].cursor for room, events in counted.items()})
        for room, events in counted.items():
            self._committed(room, events)

    async def _after(self, tx: Tx) -> None:
        for callback in tx.after:
            callback()
        for work in tx.later:
            await work()
        if self.ended is not None:
            for row in tx.ended:
                try:
                    await self.ended(row)
                except Exception:  # what ended it is committed and stands; the rest is logged
                    logger.exception("the handoff of execution %s was not settled", row.id)

    @staticmethod
    async def _count(connection: AsyncConnection, tx: Tx) -> dict[str, list[NewEvent]]:
        """Number each room's events on from its newest and store them all; the events by room. Where
        the rooms' counts were read as they were locked (PostgreSQL), one statement sets the counts
        and stores the events; else one statement counts on the rooms' rows, inside the write (SQLite
        reads outside its transactions until the first write, so the count is never read before it)."""
        events = tx.events
        rooms: dict[str, list[NewEvent]] = {}
        for event in events:
            rooms.setdefault(event.room_id, []).append(event)
        if tx.counts and all(room in tx.counts for room in rooms):
            await Bus._count_and_store(connection, tx.counts, rooms)
            return rooms
        if len(rooms) == 1:
            [(room, own)] = rooms.items()
            counted = await connection.execute(_COUNT_EVENTS, {"room": room, "count": len(own)})
            newest = {room: counted.scalar()}
        else:  # every room's count in one statement
            values: dict[str, str | int] = {f"room{n}": room for n, room in enumerate(rooms)}
            values.update((f"count{n}", len(own)) for n, own in enumerate(rooms.values()))
            counted = await connection.execute(_count_rooms(len(rooms)), values)
            newest = {row.id: row.last_event for row in counted}
        for room, own in rooms.items():
            last = newest.get(room)
            if last is None:
                raise NotFound(f"no room '{room}'", "room_id")
            for offset, event in enumerate(own, start=last - len(own) + 1):
                event.cursor = offset
        await connection.execute(_INSERT_EVENTS, [event.row() for event in events])  # one INSERT
        return rooms

    @staticmethod
    async def _count_and_store(
        connection: AsyncConnection, counts: dict[str, int], rooms: dict[str, list[NewEvent]]
    ) -> None:
        """Number each room's events on from its count as it was locked; store them and the new
        counts in one statement."""
        for room, own in rooms.items():
            for offset, event in enumerate(own, start=counts[room] + 1):
                event.cursor = offset
        events = [event for own in rooms.values() for event in own]
        values = {
            "counted_rooms": list(rooms),
            "room_counts": [counts[room] + len(own) for room, own in rooms.items()],
            "event_rooms": [event.room_id for event in events],
            "event_cursors": [event.cursor for event in events],
            "event_types": [event.type for event in events],
            "event_data": [json_text(event.shown()) for event in events],
            "event_times": [event.created_at for event in events],
        }
        await connection.execute(_COUNT_AND_STORE, values)

    def _committed(self, room: str, events: list[NewEvent]) -> None:
        """Hand out a room's events committed here: at once when they are next, else from the table."""
        handed = self._handed.get(room)
        if handed is None:
            return  # nobody here follows the room
        if handed != events[0].cursor - 1:
            self._mark_stale(room)  # another replica's, or an earlier commit here, come first
            return
        for event in events:
            self._fan_out(frame(event))
        if room in self._handed:
            self._handed[room] = events[-1].cursor

    def _heard(self, room: str | None, cursor: int) -> None:
        """Another replica committed events in `room` up to `cursor` (None: any room, after a gap)."""
        if room is None:
            for followed in self._handed:
                self._mark_stale(followed)
        elif room in self._handed and cursor > self._handed[room]:
            self._mark_stale(room)

    def _mark_stale(self, room: str) -> None:
        self._stale.add(room)
        self._wake.set()

    async def _read_back(self) -> None:
        """Read stale rooms' events after their last handed out, in order, until cancelled."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            while self._stale:
                room = self._stale.pop()
                try:
                    await self._catch_up(room)
                except Exception:  # the database is busy: read the room again shortly
                    logger.warning("could not read new events of a room; retrying", exc_info=True)
                    self._stale.add(room)
                    await anyio.sleep(RETRY)

    async def _catch_up(self, room: str) -> None:
        while (after := self._handed.get(room)) is not None:
            async with self.sessions() as session:
                rows, more = await event_page(session, room, after)
            for row in rows:
                handed = self._handed.get(room)
                if handed is None:
                    return  # nobody follows it any more
                if row.cursor > handed:
                    self._fan_out(frame(row))
                    if room in self._handed:
                        self._handed[room] = row.cursor
            if not more:
                return

    def live(self, room_id: str, type: str, data: dict[str, Any]) -> None:
        """An event that is not stored (streamed text): sent to current watchers only."""
        payload = {"type": type, "room_id": room_id, "cursor": None, "data": data}
        self._fan_out(payload)
        if self._relay is not None:
            self._relay.live(payload)

    def to_agent(self, agent_id: str, payload: dict[str, Any]) -> int:
        """Send a frame to every connection of an external agent (on every replica); how many here
        got it."""
        if self._relay is not None:
            self._relay.to_agent(agent_id, payload)
        return self._to_own_agent(agent_id, payload)

    def _to_own_agent(self, agent_id: str, payload: dict[str, Any]) -> int:
        connections = self._agents.get(agent_id)
        if not connections:
            return 0
        item = encoded(payload)
        return sum(self._offer(watcher, item) for watcher in list(connections))

    def watch(self, agent_id: str | None = None, principal: Principal | None = None) -> Watcher:
        watcher = Watcher(agent_id, principal)
        self._watchers.add(watcher)
        if agent_id is not None:
            self._agents.setdefault(agent_id, set()).add(watcher)
        return watcher

    async def follow(self, watcher: Watcher, room: str) -> None:
        """Live events of `room` from now on, without a replay."""
        upto = await self.subscribe(watcher, {room: 0})
        watcher.rooms[room] = max(watcher.rooms.get(room, 0), upto[room])

    def unwatch(self, watcher: Watcher) -> None:
        """The watcher's owner is done with it."""
        self._evict(watcher)

    def _evict(self, watcher: Watcher) -> None:
        """No more frames: it leaves every index, and its writer stops."""
        self._watchers.discard(watcher)
        if watcher.agent_id is not None:
            self._drop(self._agents, watcher.agent_id, watcher)
        self.unsubscribe(watcher, list(watcher.rooms))
        watcher.close()

    def unsubscribe(self, watcher: Watcher, rooms: list[str]) -> None:
        """No more events of `rooms` for this watcher."""
        for room in rooms:
            watcher.rooms.pop(room, None)
            if self._drop(self._followers, room, watcher):
                self._handed.pop(room, None)  # nobody here follows it: a later follower starts afresh
                self._stale.discard(room)

    @staticmethod
    def _drop(index: dict[str, set[Watcher]], key: str, watcher: Watcher) -> bool:
        """Remove `watcher` from `index[key]`; True when that left nobody there."""
        members = index.get(key)
        if members is None:
            return False
        members.discard(watcher)
        if members:
            return False
        del index[key]
        return True

    async def subscribe(self, watcher: Watcher, cursors: Mapping[str, int]) -> dict[str, int]:
        """Start live events for the rooms of `cursors` (room -> the cursor the watcher has seen); per
        room, the cursor up to which its past comes from `replay`.

        Every event after the returned cursor reaches the watcher live, every one up to it is in the
        replay. For a room nobody here followed, its newest cursor is read from the table after the
        watcher is registered, and the room is read once more after it. The caller sends the replay
        before the live frames queued after this call.
        """
        for room, cursor in cursors.items():
            watcher.rooms[room] = cursor
            self._followers.setdefault(room, set()).add(watcher)
        unknown = [room for room in cursors if room not in self._handed]
        if unknown:
            async with self.sessions() as session:
                query = select(Room.id, Room.last_event).where(Room.id.in_(unknown))
                newest = {room: last for room, last in (await session.execute(query)).all()}
            for room in unknown:
                if room not in self._handed and room in self._followers:
                    self._handed[room] = newest.get(room) or 0
                    self._mark_stale(room)  # what committed since that read comes from the table
        return {room: self._handed.get(room, 0) for room in cursors}

    async def backlog_size(self, cursors: Mapping[str, int], upto: Mapping[str, int]) -> int:
        """How many events `replay` will read, at a cost that does not grow with the backlog: each
        room's are counted up to `COUNTED`; past that, a room's backlog is `upto - cursor`, exact for
        the events rooms counted one by one (since migration 0012) and, for a backlog reaching back
        before it (whose events kept their sparser old numbers), at most that."""
        wanted = {room: cursor for room, cursor in cursors.items() if upto.get(room, 0) > cursor}
        if not wanted:
            return 0
        counts = [
            select(literal(room).label("room"), func.count().label("events")).select_from(
                select(RoomEvent.seq)
                .where(RoomEvent.room_id == room, RoomEvent.cursor > cursor, RoomEvent.cursor <= upto[room])
                .limit(COUNTED)
                .subquery()
            )
            for room, cursor in wanted.items()
        ]
        async with self.sessions() as session:
            found = {row.room: row.events for row in await session.execute(union_all(*counts))}
        return sum(
            upto[room] - cursor if found.get(room, 0) >= COUNTED else found.get(room, 0)
            for room, cursor in wanted.items()
        )

    async def replay(
        self, cursors: Mapping[str, int], upto: Mapping[str, int]
    ) -> AsyncIterator[list[dict[str, Any]]]:
        """Each room's events after its cursor up to its `upto`, room by room, in order, a bounded page
        at a time (read without any lock; send each frame through `accept`, which drops what was sent
        live)."""
        for room, cursor in cursors.items():
            after, last = cursor, upto.get(room, 0)
            more = after < last
            while more:
                async with self.sessions() as session:
                    rows, more = await event_page(session, room, after, upto=last)
                if not rows:
                    break
                after = rows[-1].cursor
                yield [frame(row) for row in rows]

    def _fan_out(self, payload: dict[str, Any]) -> None:
        """The room's watchers get the event: encoded once, the same text queued for each."""
        room = payload["room_id"]
        followers = self._followers.get(room)
        if followers:
            item = encoded(payload)
            for watcher in list(followers):
                self._offer(watcher, item)
        if payload["type"] == "participant.left":  # in cursor order, on every replica
            self._remove(room, payload["data"])

    def _remove(self, room: str, participant: dict[str, Any]) -> None:
        """The participant's watchers stop following `room` (nothing after its leaving reaches them)
        and are told so; an owner or admin of the organization still sees every room of it."""
        kind, ref = participant.get("kind"), participant.get("id")
        for watcher in list(self._followers.get(room, ())):
            who = watcher.principal
            if who is None or who.is_admin or who.id != ref or kind not in who.participant_kinds:
                continue
            self.unsubscribe(watcher, [room])
            lost = NotFound(f"no room '{room}': you are no longer one of its participants", "room_id")
            self._offer(watcher, encoded({"type": "error", "room_id": room, **rest_error_body(lost)}))

    def reply(self, watcher: Watcher, item: Outgoing) -> bool:
        """A frame of the connection's own (an answer to its client, a note to its writer), queued
        after the events before it; False if that left it too far behind (it is closed)."""
        return self._offer(watcher, item)

    def _offer(self, watcher: Watcher, item: Outgoing) -> bool:
        if watcher.offer(item):
            return True
        if not watcher.closed:  # too slow: close it; it reconnects with its cursors
            watcher.fell_behind = True
        self._evict(watcher)  # (or its connection is gone)
        return False
