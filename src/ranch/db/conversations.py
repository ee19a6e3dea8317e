"""`ConversationStore`: team conversations and remote members' sessions, kept in the database.

A team keeps its conversations in memory while it works on them (routing/context.py) and writes
each one here at the end of every turn; a turn first asks for the stored version (one indexed
read), and reads the whole state only when another process wrote a newer one: after a restart,
or when the previous turn of that contextId ran on another replica. A remote member's own
context and waiting task id are written whenever they change.
"""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import and_, select
from sqlalchemy.ext.asyncio import AsyncEngine

from ranch.db.models import member_sessions, team_conversations
from ranch.db.upsert import insert_for


class ConversationStore:
    """Reads and writes conversation state; every method is one short transaction."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._insert = insert_for(engine.dialect.name)

    async def version(self, team_id: str, owner: str, context_id: str) -> int:
        """The stored version of the conversation; 0 when there is none."""
        table = team_conversations.c
        query = select(table.version).where(
            and_(table.team_id == team_id, table.owner == owner, table.context_id == context_id)
        )
        async with self.engine.connect() as connection:
            found = await connection.scalar(query)
        return int(found or 0)

    async def load(self, team_id: str, owner: str, context_id: str) -> tuple[int, dict[str, Any]] | None:
        """(version, state) of the conversation, or None when it was never stored."""
        table = team_conversations.c
        query = select(table.version, table.state).where(
            and_(table.team_id == team_id, table.owner == owner, table.context_id == context_id)
        )
        async with self.engine.connect() as connection:
            row = (await connection.execute(query)).first()
        return None if row is None else (int(row.version), dict(row.state))

    async def save(
        self, team_id: str, owner: str, context_id: str, version: int, state: dict[str, Any]
    ) -> None:
        """Store `state` as the conversation's `version` (the newest turn wins)."""
        keys = {"team_id": team_id, "owner": owner, "context_id": context_id}
        values = {"version": version, "state": state, "updated_at": time.time()}
        statement = self._insert(team_conversations).values(**keys, **values)
        upsert = statement.on_conflict_do_update(
            index_elements=list(team_conversations.primary_key.columns),
            set_=values,
        )
        async with self.engine.begin() as connection:
            await connection.execute(upsert)

    async def session(self, agent_id: str, owner: str, context_id: str) -> tuple[str, str] | None:
        """(the member's own context id, its task waiting for input) for one owner's context."""
        table = member_sessions.c
        query = select(table.remote_context_id, table.waiting_task_id).where(
            and_(table.agent_id == agent_id, table.owner == owner, table.context_id == context_id)
        )
        async with self.engine.connect() as connection:
            row = (await connection.execute(query)).first()
        return None if row is None else (str(row.remote_context_id), str(row.waiting_task_id))

    async def save_session(
        self, agent_id: str, owner: str, context_id: str, remote_context_id: str, waiting_task_id: str
    ) -> None:
        keys = {"agent_id": agent_id, "owner": owner, "context_id": context_id}
        values = {
            "remote_context_id": remote_context_id,
            "waiting_task_id": waiting_task_id,
            "updated_at": time.time(),
        }
        statement = self._insert(member_sessions).values(**keys, **values)
        upsert = statement.on_conflict_do_update(
            index_elements=list(member_sessions.primary_key.columns),
            set_=values,
        )
        async with self.engine.begin() as connection:
            await connection.execute(upsert)
