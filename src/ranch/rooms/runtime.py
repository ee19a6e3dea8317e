"""The rooms side of one server: started in the app's lifespan, after the task store.

Start-up order: migrate (done by the caller), bootstrap the default organization
and its admin, record the config's agents, build the API-registered ones, create
the demo room when asked, then recover what a stopped server left behind.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from a2a.types import Task
from anyio.abc import TaskGroup
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from ranch.catalog import records
from ranch.catalog.registry import Registry
from ranch.config import RanchConfig
from ranch.db.models import ApiKey, ParticipantKind, Role, Room, User
from ranch.fanout import Fanout
from ranch.identity.keys import digest, issue_key
from ranch.identity.orgs import DEFAULT_ORG, ensure_org
from ranch.identity.principal import SYSTEM
from ranch.policy.limits import Limits
from ranch.rooms.bus import Bus
from ranch.rooms.delivery import Dispatcher, recover
from ranch.rooms.executing import RoomExecutions
from ranch.rooms.messages import RoomMessages
from ranch.rooms.requests import AddParticipant, CreateRoom
from ranch.rooms.service import Rooms
from ranch.rooms.writing import MessageWriter
from ranch.tasks.engine import TaskEngine

logger = logging.getLogger(__name__)

DEMO_KEY = "rk_demo"
DEMO_ROOM = "demo"


@dataclass
class RoomsRuntime:
    """The rooms side's parts, each one job: rooms and participants, messages, executions, and the
    dispatcher that runs agents on what the writer delivers."""

    sessions: async_sessionmaker[AsyncSession]
    bus: Bus
    rooms: Rooms
    messages: RoomMessages
    executions: RoomExecutions
    writer: MessageWriter
    dispatcher: Dispatcher
    registry: Registry
    group: TaskGroup
    """The app's task group: agents registered over the API are hosted in it."""


async def start(
    engine: AsyncEngine,
    config: RanchConfig,
    registry: Registry,
    tasks: TaskEngine,
    group: TaskGroup,
    *,
    failed_tasks: dict[str, Task] | None = None,
    alive: set[str] | None = None,
    admin_key: str | None = None,
    demo: bool = False,
    announce: Callable[[str], None] = print,
    limits: Limits | None = None,
    fanout: Fanout | None = None,
) -> RoomsRuntime:
    sessions = async_sessionmaker(engine, expire_on_commit=False)
    bus = Bus(sessions, fanout=fanout, origin=tasks.runner, postgres=engine.dialect.name == "postgresql")
    writer = MessageWriter(bus, tasks)
    dispatcher = Dispatcher(writer, registry, group)
    writer.wake = dispatcher.wake
    executions = RoomExecutions(writer)
    bus.ended = executions.ended
    rooms = Rooms(bus, executions)
    messages = RoomMessages(writer, registry, group, limits)
    async with sessions() as session, session.begin():
        await ensure_org(session, DEFAULT_ORG, "Default organization")
        await _bootstrap_admin(session, admin_key, announce)
        await records.sync_config(session, config, registry)
    async with sessions() as session:
        failed = await records.load_registered(session, registry, group)
    for agent_id in failed:
        logger.warning("registered agent %s could not be built; it is not served", agent_id)
    await rooms.load_known()
    if demo:
        await _demo_room(sessions, rooms, config, announce)
    queued = await recover(dispatcher, failed_tasks or {}, alive or {tasks.runner})
    if queued:
        logger.info("resuming %d room message(s) a previous run had not handled", queued)
    return RoomsRuntime(sessions, bus, rooms, messages, executions, writer, dispatcher, registry, group)


async def _bootstrap_admin(
    session: AsyncSession, admin_key: str | None, announce: Callable[[str], None]
) -> None:
    """The first start creates `admin` (superuser, owner of `default`) and shows its key once."""
    admin = await session.get(User, "admin")
    if admin is None:
        admin = User(id="admin", org_id=DEFAULT_ORG, name="Admin", role=Role.OWNER, is_superuser=True)
        session.add(admin)
        await session.flush()
        if admin_key is None:
            key = await issue_key(session, DEFAULT_ORG, "user", "admin")
            announce(f"ranch: created user 'admin'; its API key (shown once): {key}")
    if admin_key is not None:
        exists = await session.scalar(
            select(func.count()).select_from(ApiKey).where(ApiKey.digest == digest(admin_key))
        )
        if not exists:
            await issue_key(session, DEFAULT_ORG, "user", "admin", key=admin_key)


async def _demo_room(
    sessions: async_sessionmaker[AsyncSession],
    rooms: Rooms,
    config: RanchConfig,
    announce: Callable[[str], None],
) -> None:
    """The built-in demo's user `demo` (key rk_demo) and room `demo` with the helpdesk team."""
    async with sessions() as session, session.begin():
        if await session.get(User, "demo") is None:
            session.add(User(id="demo", org_id=DEFAULT_ORG, name="Demo user", role=Role.OWNER))
            await session.flush()
        exists = await session.scalar(
            select(func.count()).select_from(ApiKey).where(ApiKey.digest == digest(DEMO_KEY))
        )
        if not exists:
            await issue_key(session, DEFAULT_ORG, "user", "demo", key=DEMO_KEY)
        room = await session.get(Room, DEMO_ROOM)
    if room is None:
        team = config.teams[0]
        participants = [AddParticipant(kind=ParticipantKind.USER, id="demo", role=Role.OWNER)]
        participants.append(AddParticipant(kind=ParticipantKind.TEAM, id=team.id))
        participants += [AddParticipant(kind=ParticipantKind.AGENT, id=member) for member in team.members]
        request = CreateRoom(
            id=DEMO_ROOM, title="Helpdesk demo", participants=participants, default_agent=team.id
        )
        await rooms.create(SYSTEM, request, org_id=DEFAULT_ORG)
    announce(
        f"ranch: demo room '{DEMO_ROOM}' is ready; sign in with the API key {DEMO_KEY} "
        f"(e.g. curl -H 'X-API-Key: {DEMO_KEY}' .../api/v1/rooms/{DEMO_ROOM}/messages)"
    )
