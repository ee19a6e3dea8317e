"""The stored vocabularies (room type and status, participant kind, roles, visibility, agent kind and
source, message type, execution and delivery status) round-trip through the database as their enums.

Each column holds the member's word, as the migrations made it (VARCHAR): what is written as a
member or as the plain word reads back as the member, the word is what is stored, and a word
outside the vocabulary is refused. On SQLite and PostgreSQL, through the real migrations.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from enum import StrEnum
from typing import Any

import pytest
from pydantic import TypeAdapter
from sqlalchemy import select, text
from sqlalchemy.exc import StatementError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.db.models import (
    AgentKind,
    AgentRecord,
    AgentSource,
    Delivery,
    DeliveryStatus,
    Execution,
    ExecutionStatus,
    MessageType,
    Organization,
    Participant,
    ParticipantKind,
    Role,
    Room,
    RoomMessage,
    RoomStatus,
    RoomType,
    User,
    Visibility,
)
from ranch.rooms import views

pytestmark = pytest.mark.anyio

COLUMNS: list[tuple[Any, str, type[StrEnum]]] = [
    (Room, "type", RoomType),
    (Room, "status", RoomStatus),
    (User, "role", Role),
    (AgentRecord, "kind", AgentKind),
    (AgentRecord, "visibility", Visibility),
    (AgentRecord, "source", AgentSource),
    (RoomMessage, "type", MessageType),
    (Execution, "status", ExecutionStatus),
    (Delivery, "status", DeliveryStatus),
]
"""(table, column, vocabulary) for every column with one row each (participants: below)."""


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    engine = open_engine(database_url)
    await migrate.upgrade(engine)
    made = async_sessionmaker(engine, expire_on_commit=False)
    async with made() as session, session.begin():
        session.add(Organization(id="acme", name="Acme", allowed_agent_urls=[]))
        await session.flush()
        session.add(User(id="ann", org_id="acme", name="Ann"))
        session.add(AgentRecord(id="bot", org_id="acme", kind=AgentKind.ECHO, name="Bot", spec={}))
        session.add(Room(id="r1", org_id="acme"))
        await session.flush()
        session.add(Participant(room_id="r1", kind=ParticipantKind.USER, ref="ann"))
        session.add(RoomMessage(seq=1, id="m1", room_id="r1", sender_kind="user", sender_id="ann"))
        session.add(Execution(id="e1", room_id="r1", agent_id="bot"))
        session.add(Delivery(id="d1", message_seq=1, room_id="r1", agent_id="bot"))
    yield made
    await engine.dispose()


def _key(table: Any) -> Any:
    return {Room: "r1", User: "ann", AgentRecord: "bot", RoomMessage: 1, Execution: "e1", Delivery: "d1"}[
        table
    ]


async def test_every_member_round_trips_as_itself_stored_as_its_word(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    for table, column, vocabulary in COLUMNS:
        for member in vocabulary:
            for written in (member, member.value):  # a member, or the plain word
                async with sessions() as session, session.begin():
                    row = await session.get(table, _key(table))
                    setattr(row, column, written)
                async with sessions() as session:
                    value = getattr(await session.get(table, _key(table)), column)
                    stored = await session.scalar(
                        text(f"SELECT {column} FROM {table.__tablename__} WHERE {_pk(table)} = :key"),
                        {"key": _key(table)},
                    )
                assert value is member and type(value) is vocabulary, (table, column, written)
                assert stored == member.value


async def test_a_participant_kind_and_role_round_trip_in_the_primary_key(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with sessions() as session, session.begin():
        session.add(Participant(room_id="r1", kind="agent", ref="bot", role=Role.ADMIN))
    async with sessions() as session:
        row = await session.get(Participant, ("r1", ParticipantKind.AGENT, "bot"))
        assert row is not None and row.kind is ParticipantKind.AGENT and row.role is Role.ADMIN
        kinds = (await session.scalars(select(Participant.kind).order_by(Participant.ref))).all()
        assert kinds == [ParticipantKind.USER, ParticipantKind.AGENT]  # ann, bot


async def test_a_word_outside_the_vocabulary_is_refused(sessions: async_sessionmaker[AsyncSession]) -> None:
    for table, column, _ in COLUMNS:
        with pytest.raises(StatementError):
            async with sessions() as session, session.begin():
                setattr(await session.get(table, _key(table)), column, "nonsense")


async def test_the_api_shows_the_words(sessions: async_sessionmaker[AsyncSession]) -> None:
    async with sessions() as session, session.begin():
        row = await session.get(Execution, "e1")
        assert row is not None
        row.status = ExecutionStatus.INPUT_REQUIRED
    async with sessions() as session:
        shown = views.execution(await session.get_one(Execution, "e1"))
    assert json.loads(json.dumps(shown))["status"] == "input-required"
    for vocabulary in {vocabulary for _, _, vocabulary in COLUMNS} | {ParticipantKind}:
        words = TypeAdapter(list[vocabulary]).dump_python(list(vocabulary), mode="json")  # type: ignore[valid-type]
        assert words == [member.value for member in vocabulary]
        assert TypeAdapter(list[vocabulary]).validate_python(words) == list(vocabulary)  # type: ignore[valid-type]


def _pk(table: Any) -> str:
    return "seq" if table is RoomMessage else "id"
