"""Rooms: create and join them, post and read messages, follow executions (docs/api.md).

Posting is where a room comes alive: the message and its `message.created`
event are written together with one delivery per agent it wakes (its mentions,
else the room's default agent), and the dispatcher is told after commit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import partial
from typing import Any, NamedTuple, TypeVar, cast

from a2a.types import Message, Part, Task, TaskState, TaskStatus
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from anyio.abc import TaskGroup
from sqlalchemy import CursorResult, Table, insert, or_, select
from sqlalchemy.ext.asyncio import AsyncSession

from ranch.agents.base import check_input
from ranch.catalog.registry import Registry
from ranch.db.models import (
    AgentKind,
    AgentRecord,
    Delivery,
    DeliveryStatus,
    Execution,
    MessageType,
    Participant,
    ParticipantKind,
    Role,
    Room,
    RoomEvent,
    RoomMessage,
    RoomStatus,
    User,
    now,
)
from ranch.exceptions import Conflict, InvalidInput, NotFound, PayloadTooLarge
from ranch.identity.orgs import DEFAULT_ORG, candidates, own_id
from ranch.identity.principal import SYSTEM, Principal
from ranch.identity.visibility import named_agent
from ranch.ids import new_id, random_hex
from ranch.observe import tracing
from ranch.policy.limits import Limits, check_id, check_message, check_value_keys
from ranch.policy.logs import TRACE_ID
from ranch.rooms import executions, views
from ranch.rooms import parts as room_parts
from ranch.rooms.access import Seat, require_room_admin, seat, seats, visible_room
from ranch.rooms.adapters import execution_view
from ranch.rooms.bus import Bus, NewEvent, Tx, frame
from ranch.rooms.commits import Ahead, RoomCommits
from ranch.rooms.delivery import Dispatcher
from ranch.rooms.executions import FINAL
from ranch.rooms.mentions import mentioned
from ranch.rooms.pages import PAGE_BYTES, fitting, json_size, message_size
from ranch.rooms.requests import AddParticipant, CreateRoom, PostMessage, UpdateRoom
from ranch.rooms.views import ParticipantView
from ranch.tasks.engine import TaskEngine
from ranch.wire import keys
from ranch.wire.events import CANCELED, COMPLETED, INPUT_REQUIRED, SUBMITTED, WORKING

Logged = TypeVar("Logged", RoomMessage, RoomEvent)
"""A room's log, read in cursor windows: its messages or its events."""
MAX_AGENT_CHAIN = 10
"""Agent-to-agent messages in a row (by mention) before the room stops waking agents."""
CHAIN_KEY = keys.CHAIN
_INSERT_MESSAGE = insert(cast(Table, RoomMessage.__table__))


class Rooms:
    """Rooms, their participants and messages, and the executions of the agents in them."""

    def __init__(
        self, bus: Bus, registry: Registry, tasks: TaskEngine, group: TaskGroup, limits: Limits | None = None
    ) -> None:
        self.bus = bus
        self.tasks = tasks
        """The task engine every execution runs in (an execution is a task owned by its room)."""
        self.dispatcher = Dispatcher(self, registry, group)
        self.commits = RoomCommits(bus)
        """Posts into a busy room share its transactions (rooms/commits.py)."""
        self.limits = limits or Limits()
        self.known: dict[str, str] = {}
        """Room id -> its organization, for the A2A gateway's check of each contextId without a query."""

    async def load_known(self) -> None:
        """Learn every room in the database (at start, and when other replicas may have made some):
        rooms are never deleted, so what is known stays known."""
        async with self.bus.sessions() as session:
            rows = (await session.execute(select(Room.id, Room.org_id))).all()
        self.known.update((row.id, row.org_id) for row in rows)

    # -- rooms ---------------------------------------------------------------------------------

    async def create(self, principal: Principal, request: CreateRoom, org_id: str | None = None) -> Room:
        """A room of the caller's organization (`org_id`: ranch itself creating one for an organization)."""
        org = org_id if principal is SYSTEM and org_id is not None else principal.org_id
        room_id = own_id(org, request.id) if request.id else new_id()
        async with self.bus.transaction(room_id) as tx:
            if await tx.session.get(Room, room_id) is not None:
                raise Conflict(f"the room id '{room_id}' is taken", "id")
            room = Room(
                id=room_id,
                org_id=org or DEFAULT_ORG,
                type=request.type,
                status=RoomStatus.ACTIVE,
                title=request.title or "",
                created_by=principal.id,
            )
            tx.session.add(room)
            await tx.session.flush()
            tx.after.append(lambda: self.known.__setitem__(room.id, room.org_id))
            if principal is not SYSTEM:
                creator = ParticipantKind(principal.kind)
                await self._join(
                    tx, room, AddParticipant(kind=creator, id=principal.id, role=Role.OWNER), principal
                )
            for index, member in enumerate(request.participants or []):
                await self._join(tx, room, member, principal, field=f"participants[{index}].id")
            if request.default_agent is not None:
                room.default_agent = await self._default_agent(tx, room, request.default_agent)
            return room

    async def get(self, principal: Principal, room_id: str) -> Room:
        async with self.bus.sessions() as session:
            return await visible_room(session, principal, room_id)

    async def list_rooms(
        self, principal: Principal, limit: int, after: str | None
    ) -> tuple[list[Room], str | None]:
        async with self.bus.sessions() as session:
            query = select(Room).where(Room.org_id == principal.org_id)
            if not principal.is_admin:
                query = query.where(
                    Room.id.in_(
                        select(Participant.room_id).where(
                            Participant.kind.in_(principal.participant_kinds), Participant.ref == principal.id
                        )
                    )
                )
            if after:
                query = query.where(Room.id > after)
            rows = list((await session.scalars(query.order_by(Room.id).limit(limit + 1))).all())
        return rows[:limit], (rows[limit - 1].id if len(rows) > limit else None)

    async def update(self, principal: Principal, room_id: str, request: UpdateRoom) -> Room:
        async with self.bus.transaction(room_id) as tx:
            room = await visible_room(tx.session, principal, room_id)
            if request.given("title"):
                room.title = request.title
            if request.given("default_agent"):
                value = request.default_agent
                room.default_agent = None if value is None else await self._default_agent(tx, room, value)
            if request.given("status"):
                status = request.status
                room.status = status
                if status != RoomStatus.ACTIVE:
                    open_ = await tx.session.scalars(
                        select(Execution).where(Execution.room_id == room.id, Execution.status.not_in(FINAL))
                    )
                    for row in open_.all():
                        await executions.move(tx, row, "completed", f"the room was {status}")
                        tx.later.append(partial(self._end_task, row, "completed", f"the room was {status}"))
            return room

    # -- participants --------------------------------------------------------------------------

    async def participants(self, principal: Principal, room_id: str) -> list[ParticipantView]:
        async with self.bus.sessions() as session:
            await visible_room(session, principal, room_id)
            rows = (
                await session.scalars(
                    select(Participant).where(Participant.room_id == room_id).order_by(Participant.joined_at)
                )
            ).all()
            return [ParticipantView.of(row, await _name(session, row)) for row in rows]

    async def add_participant(
        self, principal: Principal, room_id: str, request: AddParticipant
    ) -> ParticipantView:
        async with self.bus.transaction(room_id) as tx:
            room = await visible_room(tx.session, principal, room_id)
            row = await self._join(tx, room, request, principal, field="id")
            return ParticipantView.of(row, await _name(tx.session, row))

    async def remove_participant(self, principal: Principal, room_id: str, kind: str, ref: str) -> None:
        async with self.bus.transaction(room_id) as tx:
            room = await visible_room(tx.session, principal, room_id)
            row = await _participant(tx.session, room, kind, ref)
            if row is None:
                raise NotFound(f"'{ref}' is not a participant of room '{room_id}'", "id")
            data = views.participant(row, await _name(tx.session, row))
            await tx.session.delete(row)
            if room.default_agent == row.ref:
                room.default_agent = None
            await tx.emit(room.id, "participant.left", data)

    async def _join(
        self, tx: Tx, room: Room, member: AddParticipant, principal: Principal, field: str = "id"
    ) -> Participant:
        """Add `member` (a short name is the organization's own first, then as given)."""
        kind = member.kind
        if kind == ParticipantKind.USER:
            ref = await _user_of(tx.session, room.org_id, member.id, field)
        elif principal is SYSTEM:
            if await tx.session.get(AgentRecord, member.id) is None:
                raise NotFound(f"no agent or team '{member.id}'", field)
            ref = member.id
        else:
            record = await named_agent(tx.session, principal, member.id, field)
            kind = ParticipantKind.TEAM if record.kind == AgentKind.TEAM else ParticipantKind.AGENT
            ref = record.id
        existing = await tx.session.get(Participant, (room.id, kind, ref))
        if existing is not None:
            raise Conflict(f"'{ref}' is already in room '{room.id}'", field)
        row = Participant(room_id=room.id, kind=kind, ref=ref, role=member.role)
        tx.session.add(row)
        await tx.session.flush()
        await tx.emit(room.id, "participant.joined", views.participant(row, await _name(tx.session, row)))
        return row

    async def _default_agent(self, tx: Tx, room: Room, name: str) -> str:
        """The room's agent or team `name` stands for (its organization's own first)."""
        for agent_id in candidates(room.org_id, name):
            member = await tx.session.scalar(
                select(Participant.ref).where(
                    Participant.room_id == room.id,
                    Participant.kind.in_((ParticipantKind.AGENT, ParticipantKind.TEAM)),
                    Participant.ref == agent_id,
                )
            )
            if member is not None:
                return member
        raise InvalidInput(f"default_agent '{name}' is not an agent or team of this room", "default_agent")

    # -- messages ------------------------------------------------------------------------------

    async def post(self, principal: Principal, room_id: str, request: PostMessage) -> dict[str, Any]:
        """A person's or an agent's message, as the API shows it; wakes the agents it addresses."""
        metadata = request.metadata or {}
        given = room_parts.converted(request.parts or [], self.limits)
        parts = ([Part(text=request.text)] if request.text is not None else []) + given
        self._check_content(parts, given, metadata, request.thread_id)
        if any(part.WhichOneof("content") != "text" for part in given):
            await self._check_takers(principal, room_id, request, given)

        async def check(tx: Tx) -> Seat:
            found = await seat(tx.session, principal, room_id)
            if found.room.status != RoomStatus.ACTIVE:
                raise Conflict(f"room '{room_id}' is {found.room.status}", "room_id")
            if request.reply_to is not None:  # refused before anything is written, else marked answered
                await _answer(tx.session, principal, room_id, request.reply_to)
            return found

        async def apply(tx: Tx, found: Seat) -> NewEvent:
            message = await self.write(
                tx,
                found.room,
                found.sender_kind,
                principal.id,
                parts=parts,
                kind=request.type,
                mentions=request.mentions or [],
                metadata=metadata,
                thread_id=request.thread_id,
                execution_id=found.working,
            )
            if found.working is not None:  # an external agent answering: its execution is idle again
                row = await executions.fresh(tx, found.working)
                if row is not None:
                    await executions.move(tx, row, "ready", turn=True)
                    tx.later.append(partial(self._record, row, INPUT_REQUIRED, "ready", message.text))
            return tx.created[message.id]

        ahead = Ahead((principal.kind, principal.id), partial(_seats, principal))
        created = await self.commits.write(room_id, check, apply, ahead=ahead)
        return created.shown()

    async def _check_takers(
        self, principal: Principal, room_id: str, request: PostMessage, given: list[Part]
    ) -> None:
        """Refuse `given` parts an agent the post would wake does not take (UnsupportedContent naming
        `parts[i]`), before the post's transaction: a remote agent's modes may need its card fetched,
        and no room waits on that."""
        async with self.bus.sessions() as session:
            room = await visible_room(session, principal, room_id)
            wakes = request.type == MessageType.TEXT
            names = mentioned(request.text or "", list(request.mentions or [])) if wakes else []
            sender_kind = "user" if principal.kind == "user" else "agent"
            present = await _present(session, room, names, sender_kind)
            targets = _woken(
                room, _own_names(room.org_id, names, present), sender_kind, principal.id, present
            )
        registry = self.dispatcher.registry
        for target in targets:
            if target in registry:  # external agents read what they get over the API
                await check_input(registry.get(target), given, "parts")

    async def _record(self, row: Execution, state: TaskState, status: str, text: str = "") -> None:
        """An execution's task follows what happened outside a run (an external agent's turn)."""
        await self.tasks.record(
            row.id, executions.owner(row.room_id), state, text, context_id=row.room_id, execution=status
        )

    def _check_content(
        self, parts: list[Part], given: list[Part], metadata: dict[str, Any], thread: str | None
    ) -> None:
        """The same limits as every A2A entry: size (a file's bytes counted once decoded), the
        `parts` given (the model checked the text), metadata keys, ids."""
        size = Message(parts=parts).ByteSize() + len(json.dumps(metadata, ensure_ascii=False).encode())
        if size > self.limits.max_message_bytes:
            raise PayloadTooLarge(size, self.limits.max_message_bytes, "parts" if given else "text")
        check_message(Message(parts=given), self.limits, field="")
        check_value_keys(metadata, "metadata", self.limits)
        if thread is not None:
            check_id(thread, "thread_id", self.limits)

    async def write(
        self,
        tx: Tx,
        room: Room,
        sender_kind: str,
        sender_id: str,
        text: str = "",
        *,
        parts: Sequence[Part] | None = None,
        kind: str = "text",
        mentions: Sequence[str] = (),
        metadata: dict[str, Any] | None = None,
        thread_id: str | None = None,
        execution_id: str | None = None,
        chain: int = 0,
        wake: bool = True,
    ) -> RoomMessage:
        """Store a message (`text`, or A2A `parts`) with its event, and a delivery for each agent it
        wakes (a part an agent does not take reaches it as a note: rooms/delivery.py)."""
        if parts is not None:
            text = text or room_parts.joined_text(parts)
        names = mentioned(text, list(mentions)) if kind == "text" else []
        present = await _present(tx.session, room, names, sender_kind if wake and kind == "text" else None)
        names = _own_names(room.org_id, names, present)
        meta = dict(metadata or {})
        if chain:
            meta[CHAIN_KEY] = chain
        message = RoomMessage(
            id=new_id(),
            room_id=room.id,
            type=kind,
            sender_kind=sender_kind,
            sender_id=sender_id,
            text=text,
            parts=room_parts.stored(parts) if parts is not None else None,
            mentions=names,
            meta=meta,
            thread_id=thread_id,
            execution_id=execution_id,
            created_at=now(),
        )
        targets = _woken(room, names, sender_kind, sender_id, present) if wake and kind == "text" else []
        if targets:  # its deliveries name its seq: stored now, after the messages held before it
            await tx.store_held()
            message.seq = await _insert(tx.session, message)
            created = await tx.emit(room.id, "message.created", views.message(message))
            await self._deliver(tx, room, message, targets, chain)
        else:  # stored with the transaction's other messages (a batch of posts: one INSERT)
            tx.hold(message, _row(message))
            created = await tx.emit(room.id, "message.created", partial(views.message, message))
        tx.created[message.id] = created
        return message

    async def _deliver(
        self, tx: Tx, room: Room, message: RoomMessage, targets: list[str], chain: int
    ) -> None:
        if not targets:
            return
        if chain >= MAX_AGENT_CHAIN:
            await self.write(
                tx,
                room,
                "system",
                "ranch",
                f"[ranch] {MAX_AGENT_CHAIN} agent messages in a row; not waking {', '.join(targets)}. "
                "A person's message starts a new chain.",
                kind="error",
                wake=False,
            )
            return
        external = set(
            (
                await tx.session.scalars(
                    select(AgentRecord.id).where(AgentRecord.id.in_(targets), AgentRecord.is_external)
                )
            ).all()
        )
        for target in targets:
            runner = self.tasks.runner  # this replica wakes it (rooms/delivery.py)
            delivery = Delivery(
                id=new_id(),
                message_seq=message.seq,
                room_id=room.id,
                agent_id=target,
                runner=runner,
                trace=_traceparent(),
            )
            tx.session.add(delivery)
            tx.deliveries.append(delivery)
            if target in external:
                row = await executions.current(tx, room.id, target)
                await executions.move(tx, row, "working")
                tx.later.append(partial(self._record, row, WORKING, "working"))
                payload = views.delivery(delivery, message)
                tx.after.append(partial(self.bus.to_agent, target, payload))
            else:
                tx.after.append(partial(self.dispatcher.wake, delivery))

    async def messages(
        self, principal: Principal, room_id: str, since: int, limit: int, before: int | None = None
    ) -> tuple[list[RoomMessage], bool]:
        """The room's messages after the cursor `since`, oldest first (or the newest before `before`),
        and whether the page's byte bound left some of `limit` out."""
        return await self._window(principal, room_id, RoomMessage, since, before, limit)

    async def events(
        self, principal: Principal, room_id: str, since: int, limit: int, before: int | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """The room's events after the cursor `since`, oldest first (or the newest before `before`),
        and whether the page's byte bound left some of `limit` out."""
        rows, cut = await self._window(principal, room_id, RoomEvent, since, before, limit)
        return [frame(row) for row in rows], cut

    async def message_part(
        self, principal: Principal, room_id: str, message_id: str, index: int
    ) -> dict[str, Any]:
        """The stored file part `index` (counting every stored part, text included) of a message, as
        A2A JSON with its `raw` bytes: what a view's file link reads. Participant-only, like the
        room's pages; NotFound naming `message_id`, or `index` for a part that holds no bytes."""
        async with self.bus.sessions() as session:
            await visible_room(session, principal, room_id)
            query = select(RoomMessage.parts).where(
                RoomMessage.room_id == room_id, RoomMessage.id == message_id
            )
            found = (await session.execute(query)).first()
        if found is None:
            raise NotFound(f"no message '{message_id}' in room '{room_id}'", "message_id")
        stored: list[dict[str, Any]] = found[0] or []  # None: one plain text part
        if not 0 <= index < len(stored) or "raw" not in stored[index]:
            raise NotFound(f"message '{message_id}' has no file part with bytes at index {index}", "index")
        return stored[index]

    async def _window(
        self,
        principal: Principal,
        room_id: str,
        table: type[Logged],
        since: int,
        before: int | None,
        limit: int,
    ) -> tuple[list[Logged], bool]:
        """`limit` rows of the room's `table` after `since`; with `before`, the newest `limit` before
        it; oldest first either way. At most PAGE_BYTES of them (the first always; rooms/pages.py):
        True with them if that bound left rows out."""
        size = message_size() if table is RoomMessage else json_size(RoomEvent.data)
        key = table.seq if table is RoomMessage else RoomEvent.cursor  # a message's seq, an event's cursor
        order = key if before is None else key.desc()
        where = [table.room_id == room_id, key > since if before is None else key < before]
        async with self.bus.sessions() as session:
            await visible_room(session, principal, room_id)
            sizes = select(key, size).where(*where).order_by(order).limit(limit)
            sized = (await session.execute(sizes)).all()
            count = fitting([row_size for _seq, row_size in sized], PAGE_BYTES)
            if not count:
                return [], False
            edge = sized[count - 1][0]
            within = key <= edge if before is None else key >= edge
            rows = list((await session.scalars(select(table).where(*where, within).order_by(order))).all())
        return (rows if before is None else rows[::-1]), count < len(sized)

    # -- executions ----------------------------------------------------------------------------

    async def executions(self, principal: Principal, room_id: str) -> list[Execution]:
        async with self.bus.sessions() as session:
            await visible_room(session, principal, room_id)
            rows = await session.scalars(
                select(Execution).where(Execution.room_id == room_id).order_by(Execution.created_at.desc())
            )
            return list(rows.all())

    async def execution(self, principal: Principal, execution_id: str) -> Execution:
        async with self.bus.sessions() as session:
            return await self._execution(session, principal, execution_id)

    async def _execution(self, session: AsyncSession, principal: Principal, execution_id: str) -> Execution:
        row = await session.get(Execution, execution_id)
        if row is None:
            raise NotFound(f"no execution '{execution_id}'", "execution_id")
        try:
            await visible_room(session, principal, row.room_id)
        except NotFound:
            raise NotFound(f"no execution '{execution_id}'", "execution_id") from None
        return row

    async def cancel(self, principal: Principal, execution_id: str) -> Execution:
        """Stop the execution's agent (its reply is never posted) and end it CANCELED."""
        row = await self.execution(principal, execution_id)
        return await self.end(row, "canceled", f"canceled by {principal.id}")

    async def complete(self, principal: Principal, execution_id: str, reason: str = "") -> Execution:
        """End the execution COMPLETED (a room admin's call): its agent's next message starts a new one."""
        async with self.bus.sessions() as session:
            row = await self._execution(session, principal, execution_id)
            await require_room_admin(session, principal, row.room_id)
        return await self.end(row, "completed", reason or f"completed by {principal.id}")

    async def end(self, row: Execution, ending: str, reason: str) -> Execution:
        """End an execution from outside: `canceled` or `completed`, with why."""
        if row.status in FINAL:
            raise Conflict(f"execution '{row.id}' already ended ({row.status})", "execution_id")
        await self._end_task(row, ending, reason)
        async with self.bus.sessions() as session:
            ended = await session.get(Execution, row.id)
        return ended or row

    async def _end_task(self, row: Execution, ending: str, reason: str) -> None:
        """End the execution's task (stopping a turn in flight) and bring the row in line with it."""
        owner = executions.owner(row.room_id)
        try:
            if ending == "canceled":
                task = await self.tasks.cancel(row.id, owner, reason)
            else:
                task = await self.tasks.complete(row.id, owner, reason)
        except TaskNotFoundError:  # never ran a turn: nothing of it was stored yet
            task = await self.tasks.record(
                row.id, owner, CANCELED if ending == "canceled" else COMPLETED, reason,
                context_id=row.room_id, execution=ending,
            )  # fmt: skip
        except TaskNotCancelableError:  # its task ended already: the row follows it
            task = await self.tasks.get(row.id, owner)
        async with self.bus.transaction(row.room_id) as tx:
            fresh = await executions.fresh(tx, row.id)
            if fresh is not None:
                await executions.project(tx, fresh, task)

    async def follow(self, tasks: dict[str, Task]) -> None:
        """Rows of executions whose tasks changed outside a run here (a stopped replica's) follow them."""
        await executions.follow_tasks(self.bus, tasks)

    async def task(self, principal: Principal, execution_id: str, history_length: int | None) -> Task:
        """The execution as an A2A Task (history: what the agent received or wrote)."""
        async with self.bus.sessions() as session:
            row = await self._execution(session, principal, execution_id)
        return await self.execution_task(row, history_length)

    async def execution_task(self, row: Execution, history_length: int | None) -> Task:
        """`row` as an A2A Task, its history trimmed to `history_length` or else the agent's own."""
        try:
            task = await self.tasks.get(row.id, executions.owner(row.room_id))
        except TaskNotFoundError:  # never ran a turn yet (queued behind another message)
            task = Task(id=row.id, context_id=row.room_id, status=TaskStatus(state=SUBMITTED))
        async with self.bus.sessions() as session:
            limit = history_length
            if limit is None:
                limit = await session.scalar(
                    select(AgentRecord.history_length).where(AgentRecord.id == row.agent_id)
                )
            history = await execution_history(session, row)
        return execution_view(task, row, history, limit)


async def execution_history(session: AsyncSession, row: Execution) -> list[RoomMessage]:
    """Messages delivered to the execution's agent in its room, and those it wrote, oldest first."""
    delivered = select(Delivery.message_seq).where(
        Delivery.room_id == row.room_id, Delivery.agent_id == row.agent_id
    )
    rows = await session.scalars(
        select(RoomMessage)
        .where(
            RoomMessage.room_id == row.room_id,
            or_(
                RoomMessage.seq.in_(delivered),
                RoomMessage.sender_id == row.agent_id,
                RoomMessage.execution_id == row.id,
            ),
        )
        .order_by(RoomMessage.seq)
    )
    return list(rows.all())


async def _answer(session: AsyncSession, principal: Principal, room_id: str, delivery_id: str) -> None:
    """Acknowledge the delivery a message answers, in the message's transaction: answered once."""
    row = await session.get(Delivery, delivery_id, with_for_update=True)
    if row is None or row.agent_id != principal.id or row.room_id != room_id:
        raise NotFound(
            f"no delivery '{delivery_id}' for agent '{principal.id}' in room '{room_id}'", "reply_to"
        )
    if row.status == DeliveryStatus.DONE:
        raise Conflict(f"delivery '{delivery_id}' was answered or acknowledged already", "reply_to")
    row.status = DeliveryStatus.DONE


class Present(NamedTuple):
    """The room's participants a message reads: every id, and those of its agents and teams."""

    refs: set[str]
    agents: set[str]


async def _present(session: AsyncSession, room: Room, names: list[str], waker: str | None) -> Present | None:
    """The room's participants when a message needs them (its mentions name some, or it may wake
    the default agent: `waker` is the sender's kind when it wakes agents); None when it does not,
    and no query is made (a plain post)."""
    own = bool(names) and (room.org_id != DEFAULT_ORG or waker is not None)
    if not own and not (waker == "user" and room.default_agent is not None):
        return None
    rows = (
        await session.execute(select(Participant.ref, Participant.kind).where(Participant.room_id == room.id))
    ).all()
    agents = {ref for ref, kind in rows if kind in (ParticipantKind.AGENT, ParticipantKind.TEAM)}
    return Present({ref for ref, _kind in rows}, agents)


def _woken(
    room: Room, names: list[str], sender_kind: str, sender_id: str, present: Present | None
) -> list[str]:
    """The agents and teams of the room a message wakes: those it names (not its sender), else, for
    a person's message, the room's default agent."""
    if present is None:
        return []
    targets = [name for name in names if name in present.agents and name != sender_id]
    if not targets and sender_kind == "user" and room.default_agent in present.agents:
        targets = [room.default_agent]
    return targets


async def _name(session: AsyncSession, row: Participant) -> str:
    if row.kind == "user":
        user = await session.get(User, row.ref)
        return user.name if user else row.ref
    agent = await session.get(AgentRecord, row.ref)
    return agent.name if agent else row.ref


async def _user_of(session: AsyncSession, org_id: str, name: str, field: str) -> str:
    """The id of the organization's user `name` stands for (its own `<org>.<name>` first)."""
    for user_id in candidates(org_id, name):
        user = await session.get(User, user_id)
        if user is not None and user.org_id == org_id:
            return user.id
    raise NotFound(f"no user '{name}'", field)


async def _participant(session: AsyncSession, room: Room, kind: str, ref: str) -> Participant | None:
    """The room's participant `ref` names (its organization's own `<org>.<ref>` first)."""
    if kind not in tuple(ParticipantKind):
        return None
    for candidate in candidates(room.org_id, ref):
        row = await session.get(Participant, (room.id, kind, candidate))
        if row is not None:
            return row
    return None


def _own_names(org_id: str, names: list[str], present: Present | None) -> list[str]:
    """Mentions as participant ids: `@helper` in a room of `acme` is `acme.helper` when it takes part."""
    if not names or present is None or org_id == DEFAULT_ORG:
        return names
    resolved = (next((c for c in candidates(org_id, name) if c in present.refs), name) for name in names)
    return list(dict.fromkeys(resolved))


async def _insert(session: AsyncSession, message: RoomMessage) -> int:
    """Store `message` with one INSERT, outside the session's unit of work (nothing to flush, no row
    read back); its `seq`."""
    connection = await session.connection()  # a plain statement: no ORM machinery on the way
    result = cast(CursorResult[Any], await connection.execute(_INSERT_MESSAGE, _row(message)))
    key = result.inserted_primary_key  # SQLite's rowid, PostgreSQL's RETURNING
    assert key is not None
    seq: int = key[0]
    return seq


async def _seats(principal: Principal, tx: Tx, room_ids: list[str]) -> None:
    await seats(tx.session, principal, room_ids)


def _row(message: RoomMessage) -> dict[str, Any]:
    """The columns of a new message, as an INSERT takes them."""
    return {
        "id": message.id,
        "room_id": message.room_id,
        "type": message.type,
        "sender_kind": message.sender_kind,
        "sender_id": message.sender_id,
        "text": message.text,
        "parts": message.parts,
        "mentions": message.mentions,
        "metadata": message.meta,
        "thread_id": message.thread_id,
        "execution_id": message.execution_id,
        "created_at": message.created_at,
    }


def _traceparent() -> str | None:
    """What a delivery keeps of the request that posted its message: the span's `traceparent` with
    tracing on, else one naming the request's trace id (not sampled), so the turn's log lines and
    the page's trace id are the request's either way."""
    if tracing.tracer() is not None:
        return tracing.traceparent()
    trace_id = TRACE_ID.get()
    return f"00-{trace_id}-{random_hex()[:16]}-00" if trace_id else None
