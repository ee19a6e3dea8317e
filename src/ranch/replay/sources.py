"""Where recorded turns come from: a ranch's task store (SQLite or PostgreSQL), or another ranch
over A2A (GetTask, with the task's history).

A team task is stored with its owner, `{team}/{caller}` (hub/serving.py), so the store says which
team a turn was for; a room's execution (`room:…`) is not a team turn.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import AgentCardResolutionError
from a2a.types import GetTaskRequest, Task
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

from ranch.db.engine import open_engine
from ranch.db.models import ranch_tasks as tasks
from ranch.replay.recording import RecordedTurn, ReplayInputError, turn_from_task
from ranch.wire.cards import AGENTS_PATH, agent_url

TEAM_TURN_STATES = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_INPUT_REQUIRED")
"""A turn that ended: answered, failed, or waiting for the caller."""


def store_engine(url: str) -> AsyncEngine:
    """The store at `url`; a SQLite file that is not there is an error, not a new empty database."""
    if url.startswith("sqlite"):
        path = url.split(":///", 1)[-1]
        if path and path != ":memory:" and not Path(path).exists():
            raise ReplayInputError(f"no database at {path} (--db, or RANCH_DATABASE_URL)")
    return open_engine(url)


async def from_store(url: str, task_id: str, team: str | None = None) -> RecordedTurn:
    """The turn task `task_id` recorded in the store at `url`."""
    engine = store_engine(url)
    try:
        async with engine.connect() as connection:
            stored = await stored_task(connection, task_id)
    except SQLAlchemyError as exc:
        raise ReplayInputError(f"cannot read tasks from {shown_url(url)}: {type(exc).__name__}") from exc
    finally:
        await engine.dispose()
    if stored is None:
        raise ReplayInputError(f"no task '{task_id}' in {shown_url(url)}")
    owner, task = stored
    if owner.startswith(ROOM_OWNER):
        raise ReplayInputError(f"task '{task_id}' is a room's execution, not a team turn")
    return turn_from_task(task, team or owner.partition("/")[0])


ROOM_OWNER = "room:"
"""How a room's execution is owned in the store (`room:{id}`); a team task's owner is `{team}/{caller}`."""


async def stored_task(reader: AsyncConnection | AsyncSession, task_id: str) -> tuple[str, Task] | None:
    """(its owner, the task) as the store holds it, or None: what `from_store` reads, and the REST
    replay through the hub's own database sessions."""
    query = select(tasks.c.owner, tasks.c.body).where(tasks.c.id == task_id)
    row = (await reader.execute(query)).first()
    return None if row is None else (str(row.owner), Task.FromString(row.body))


async def recent_turns(url: str, team: str, last: int) -> list[RecordedTurn]:
    """The team's last `last` turns in the store at `url`, oldest first (tasks with no route skipped)."""
    engine = store_engine(url)
    # the owners `{team}/…` are one range of the owner index: `/` sorts just before `0`
    query = (
        select(tasks.c.body)
        .where(tasks.c.owner >= f"{team}/", tasks.c.owner < f"{team}0", tasks.c.state.in_(TEAM_TURN_STATES))
        .order_by(tasks.c.updated_ns.desc(), tasks.c.id.desc())
        .limit(last)
    )
    try:
        async with engine.connect() as connection:
            bodies: list[bytes] = list((await connection.execute(query)).scalars().all())
    except SQLAlchemyError as exc:
        raise ReplayInputError(f"cannot read tasks from {shown_url(url)}: {type(exc).__name__}") from exc
    finally:
        await engine.dispose()
    turns = []
    for body in reversed(bodies):
        try:
            turns.append(turn_from_task(Task.FromString(body), team))
        except ReplayInputError:
            continue  # a task of the team that holds no route (an early failure): nothing to replay
    return turns


async def from_remote(url: str, task_id: str, team: str | None = None, key: str = "") -> RecordedTurn:
    """The turn task `task_id` recorded on another ranch: GetTask on the team's A2A endpoint. `url`
    is the team's agent URL (`…/a2a/agents/desk`), or the server's with `team` naming it."""
    base, named = _team_url(url, team)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(timeout=30, headers=headers) as http:
        try:
            card = await A2ACardResolver(http, base).get_agent_card()
        except (AgentCardResolutionError, httpx.HTTPError) as exc:
            raise ReplayInputError(f"cannot read the card of '{named}' at {base}: {exc}") from exc
        config = ClientConfig(httpx_client=http, supported_protocol_bindings=[TransportProtocol.JSONRPC])
        client = ClientFactory(config).create(card)
        try:
            task = await client.get_task(GetTaskRequest(id=task_id))
        except A2AError as exc:
            raise ReplayInputError(f"no task '{task_id}' at {base}: {exc}") from exc
        except httpx.HTTPError as exc:
            raise ReplayInputError(f"cannot reach {base}: {exc!r}") from exc
    return turn_from_task(task, named)


def _team_url(url: str, team: str | None) -> tuple[str, str]:
    """(the team's agent URL, its id)."""
    head, found, tail = url.rstrip("/").partition(AGENTS_PATH + "/")
    if found and tail:
        return f"{head}{AGENTS_PATH}/{tail}", team or tail
    if team is None:
        raise ReplayInputError(f"--from {url}: name the team (--team ID) or give its URL (…{AGENTS_PATH}/ID)")
    return agent_url(url, team), team


def shown_url(url: str) -> str:
    """The store's URL without a password."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if at and ":" in credentials:
        return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"
    return url
