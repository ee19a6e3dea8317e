"""`ConversationStore`: team conversations, remote members' sessions and the checkpoints of turns in
flight, kept in the database.

A team keeps its conversations in memory while it works on them (routing/context.py) and writes
each one here at the end of every turn; a remote member's own context and waiting task id are
written whenever they change. Writes go through group commit: a conversation is deferred to the
next write of the group it shares with the task store (`CommitGroup`), so it is committed in the
same transaction as the task that answers its turn, and never after the caller is told. With replicas
(`shared`), a turn first asks for the stored version (one indexed read) and reads the whole state
only when another process wrote a newer one; a single process reads a conversation only when it
does not hold it and it may be stored: it learns at start which conversations are (`open`) and
notes each one it stores, so a conversation it has never seen costs no read.

A turn's checkpoint (routing/durable.py) is written when each of its hops starts, in the same
transaction as the conversation so far, and deleted with the task's end.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Select, Table, and_, bindparam, delete, select
from sqlalchemy.ext.asyncio import AsyncEngine

from ranch.db.group_commit import CommitGroup, GroupWriter
from ranch.db.models import member_sessions, team_conversations, turn_checkpoints
from ranch.db.upsert import insert_for


class ConversationStore:
    """Reads and writes conversation state; reads are one short query, writes are group-committed."""

    def __init__(
        self, engine: AsyncEngine, *, shared: bool = False, commits: CommitGroup | None = None
    ) -> None:
        self.engine = engine
        self.shared = shared
        """Other processes write these conversations too (replicas): what is held may be stale."""
        self.commits = commits or CommitGroup(engine)
        """Shared with the task store, so a turn's conversation and its task commit together."""
        insert = insert_for(engine.dialect.name)
        self._conversations = GroupWriter(
            engine,
            _upsert(insert, team_conversations, ("version", "state", "updated_at")),
            group=self.commits,
        )
        self._sessions = GroupWriter(
            engine,
            _upsert(insert, member_sessions, ("remote_context_id", "waiting_task_id", "updated_at")),
            group=self.commits,
        )
        self._checkpoints = GroupWriter(
            engine,
            _upsert(insert, turn_checkpoints, ("owner", "team_id", "state", "updated_at")),
            group=self.commits,
        )
        self._finished = GroupWriter(
            engine,
            delete(turn_checkpoints).where(turn_checkpoints.c.task_id == bindparam("gone")),
            group=self.commits,
        )
        self._stored: set[int] | None = None
        """Hashes of the conversations stored, while this process is their only writer (after `open`)."""

    async def open(self) -> None:
        """One process alone: learn which conversations are stored (their keys, read once)."""
        if self.shared:
            return
        stored: set[int] = set()
        async with self.engine.connect() as connection:
            result = await connection.stream(stored_keys())
            async for rows in result.partitions():  # row by row cost far more CPU at start
                stored.update(hash((team_id, owner, context_id)) for team_id, owner, context_id in rows)
        self._stored = stored

    def may_hold(self, team_id: str, owner: str, context_id: str) -> bool:
        """False only when the conversation is certainly not stored (a single process that knows)."""
        return self._stored is None or hash((team_id, owner, context_id)) in self._stored

    async def version(self, team_id: str, owner: str, context_id: str) -> int:
        """The stored version of the conversation; 0 when there is none."""
        await self.commits.settle()  # this process's own deferred writes first
        table = team_conversations.c
        query = select(table.version).where(
            and_(table.team_id == team_id, table.owner == owner, table.context_id == context_id)
        )
        async with self.engine.connect() as connection:
            found = await connection.scalar(query)
        return int(found or 0)

    async def load(self, team_id: str, owner: str, context_id: str) -> tuple[int, dict[str, Any]] | None:
        """(version, state) of the conversation, or None when it was never stored."""
        await self.commits.settle()
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
        """Store `state` as the conversation's `version` (the newest turn wins): committed with the
        group's next write (the task that ends the turn), or within the group's linger; returns at once."""
        row = {"team_id": team_id, "owner": owner, "context_id": context_id, "version": version}
        if self._stored is not None:
            self._stored.add(hash((team_id, owner, context_id)))
        self._conversations.defer({**row, "state": state, "updated_at": time.time()})

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
        row = {"agent_id": agent_id, "owner": owner, "context_id": context_id}
        ids = {"remote_context_id": remote_context_id, "waiting_task_id": waiting_task_id}
        await self._sessions.write({**row, **ids, "updated_at": time.time()})

    async def save_checkpoint(
        self, task_id: str, owner: str, team_id: str, state: dict[str, Any], *, wait: bool = True
    ) -> None:
        """Store where the turn of `task_id` is, in one transaction with every conversation deferred so
        far (the one it checkpoints among them): returns once committed, or at once (`wait` False)
        leaving it to the group's next write or its linger."""
        row = {
            "task_id": task_id,
            "owner": owner,
            "team_id": team_id,
            "state": state,
            "updated_at": time.time(),
        }
        if wait:
            await self._checkpoints.write(row)
        else:
            self._checkpoints.defer(row)

    def drop_checkpoint(self, task_id: str) -> None:
        """The turn ended: its checkpoint goes with the group's next write (the task's final state)."""
        self._finished.defer({"gone": task_id})

    async def checkpoint(self, task_id: str) -> tuple[str, str, dict[str, Any]] | None:
        """(owner, team, state) of the turn in flight on `task_id`, or None when it has none."""
        table = turn_checkpoints.c
        query = select(table.owner, table.team_id, table.state).where(table.task_id == task_id)
        async with self.engine.connect() as connection:
            row = (await connection.execute(query)).first()
        return None if row is None else (str(row.owner), str(row.team_id), dict(row.state))


KEYS_PER_READ = 10_000
"""Stored conversations' keys read at a time at start: a bounded batch, not one row per round trip."""


def stored_keys() -> Select[str, str, str]:
    """Every stored conversation's key, read once at start by a process that runs alone."""
    table = team_conversations.c
    return select(table.team_id, table.owner, table.context_id).execution_options(yield_per=KEYS_PER_READ)


def _upsert(insert: Callable[[Any], Any], table: Table, changes: tuple[str, ...]) -> Any:
    """One upsert statement for `table`, built once: its rows come as parameters (executemany)."""
    statement = insert(table)
    return statement.on_conflict_do_update(
        index_elements=list(table.primary_key.columns),
        set_={key: statement.excluded[key] for key in changes},
    )
