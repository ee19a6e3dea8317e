"""Registering one agent id twice at the same moment: the database decides.

Within one organization exactly one registration wins (201), the other gets a clean 409 CONFLICT
naming `id` (never a 500), and the id serves the winner's agent. Two organizations choosing the
same name at the same moment both win: each gets its own id. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.types import Message
from sqlalchemy.ext.asyncio import async_sessionmaker

from _support.hubkit import ADMIN_KEY, Api, serve_ranch
from ranch.agents.base import Agent, AgentInfo, Call, Event, reply
from ranch.catalog import records
from ranch.catalog.registry import Registry
from ranch.config import parse_config
from ranch.db import migrate
from ranch.db.engine import open_engine
from ranch.db.models import AgentRecord, Organization
from ranch.exceptions import Unprocessable
from ranch.wire.client import ClientPool

CONFIG = """
agents:
  - {id: greeter, kind: echo}
"""
PAIRS = 10
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}


async def _register_all(
    base_url: str, keys: dict[str, str], ids: list[str]
) -> dict[str, list[tuple[str, int, Any]]]:
    """Every id registered with each key, all at once."""
    async with httpx.AsyncClient(timeout=60) as client:

        async def register(agent_id: str, who: str) -> tuple[str, int, Any]:
            body = {"id": agent_id, "kind": "rules", "rules": [{"reply": f"I am {who}'s agent"}]}
            answer = await client.post(
                f"{base_url}/api/v1/agents", json=body, headers={"X-API-Key": keys[who]}
            )
            is_json = answer.headers.get("content-type", "").startswith("application/json")
            return who, answer.status_code, answer.json() if is_json else answer.text

        results = await asyncio.gather(*(register(agent_id, who) for agent_id in ids for who in keys))
    return {agent_id: list(results[len(keys) * i : len(keys) * (i + 1)]) for i, agent_id in enumerate(ids)}


def ask(url: str, key: str) -> httpx.Response:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "who are you?"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return httpx.post(url, json=body, headers={**V1, "X-API-Key": key}, timeout=30)


def test_concurrent_registrations_of_one_id_give_one_201_and_one_409(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys", caller_rate=None) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        owner = admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]
        second = Api(hub.url, owner).post("/users", {"id": "ann", "name": "Ann", "role": "admin"})["api_key"]
        keys = {"owner": owner, "ann": second}  # two admins of one organization
        pairs = asyncio.run(_register_all(hub.url, keys, [f"dup{number}" for number in range(PAIRS)]))
        for agent_id, results in pairs.items():
            statuses = sorted(status for _, status, _ in results)
            assert statuses == [201, 409], (agent_id, results)
            winner = next(who for who, status, _ in results if status == 201)
            refused = next(body for _, status, body in results if status == 409)
            assert refused["error"]["code"] == "CONFLICT" and refused["error"]["field"] == "id", refused

            row = Api(hub.url, owner).get(f"/agents/acme.{agent_id}")
            assert row["org_id"] == "acme"
            answer = ask(hub.agent_url(f"acme.{agent_id}"), owner)
            assert answer.json()["result"]["message"]["parts"][0]["text"] == f"I am {winner}'s agent", (
                answer.text
            )


def test_two_organizations_choosing_one_name_at_once_both_get_it(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys", caller_rate=None) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        keys = {
            org: admin.post("/organizations", {"id": org})["owner"]["api_key"] for org in ("acme", "beta")
        }
        pairs = asyncio.run(_register_all(hub.url, keys, [f"dup{number}" for number in range(PAIRS)]))
        for agent_id, results in pairs.items():
            assert sorted(status for _, status, _ in results) == [201, 201], (agent_id, results)
            assert {body["agent"]["id"] for _, _, body in results} == {f"acme.{agent_id}", f"beta.{agent_id}"}
            for org, other in (("acme", "beta"), ("beta", "acme")):
                answer = ask(hub.agent_url(f"{org}.{agent_id}"), keys[org])
                assert answer.json()["result"]["message"]["parts"][0]["text"] == f"I am {org}'s agent"
                assert ask(hub.agent_url(f"{org}.{agent_id}"), keys[other]).status_code == 404  # private


class Unstartable(Agent):
    """An agent whose `open` fails, as one whose tools cannot start would."""

    def __init__(self, agent_id: str) -> None:
        self.id = agent_id

    async def info(self) -> AgentInfo:
        return AgentInfo(id=self.id, name=self.id)

    async def open(self) -> None:
        raise RuntimeError("its tool server would not start")

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        yield reply(message, "never")


@pytest.mark.anyio
async def test_an_agent_that_cannot_be_served_is_not_registered(tmp_path: Path) -> None:
    """Serving happens after the commit; when it fails, the row goes again and the error says why."""
    engine = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}")
    try:
        await migrate.upgrade(engine)
        sessions = async_sessionmaker(engine, expire_on_commit=False)
        async with sessions() as session, session.begin():
            session.add(Organization(id="acme", name="Acme", allowed_agent_urls=[]))
            await session.flush()
            row = AgentRecord(id="broken", org_id="acme", kind="echo", name="broken", source="api", spec={})
            session.add(row)
        registry = Registry(parse_config(CONFIG), ClientPool())
        async with anyio.create_task_group() as group:
            with pytest.raises(Unprocessable) as refused:
                await records._serve(sessions, row, Unstartable("broken"), [], registry, group)
        assert refused.value.field == "id"
        assert str(refused.value) == (
            "agent 'broken' was not registered: cannot start: RuntimeError: its tool server would not start"
        )
        assert "broken" not in registry
        async with sessions() as session:
            assert await session.get(AgentRecord, "broken") is None  # the id is free again
    finally:
        await engine.dispose()
