"""A team conversation outlives its process: after `kill -9` and a new start on the same database,
the answer to a member's question goes to that member, which continues its own remote task.

The team's default agent would take a follow-up whose conversation was lost; the remote `asker`
(an a2a-sdk server) completes only a follow-up on the task it opened. Both SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio

from _support import TESTS
from _support.hubkit import reply_text, send_text, serve_ranch
from _support.peers import running_peer
from _support.servers import ServerProcess, free_port
from ranch.db import migrate
from ranch.db.conversations import ConversationStore
from ranch.db.engine import open_engine
from ranch.routing.context import Conversation, Conversations

CONFIG = """
agents:
  - id: front
    kind: rules
    rules:
      - {{match: "(?i)book", reply: "asking the booker", route: asker, reason: booking}}
      - {{reply: "front took: {{text}}", route: user}}
  - {{id: asker, kind: remote, url: "{asker_url}", timeout: 10}}
teams:
  - {{id: desk, members: [front, asker], default_agent: front, routes: {{asker: user}}}}
"""
REDIS = "redis://127.0.0.1:6379/0"


def serve(config: Path, database_url: str, log: Path) -> ServerProcess:
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--db", database_url]
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    return ServerProcess(command, port, env=env, log_path=log.with_suffix(f".{port}.log"))


def send(base_url: str, text: str, context_id: str, task_id: str = "") -> dict[str, Any]:
    return send_text(f"{base_url}/a2a/agents/desk", text, context_id, task_id=task_id)


def test_a_question_asked_before_a_restart_is_answered_by_the_member_that_asked(
    database_url: str, tmp_path: Path
) -> None:
    with running_peer("asker", question="For how many?") as asker:
        config = tmp_path / "desk.yaml"
        config.write_text(CONFIG.format(asker_url=asker.url))
        with serve(config, database_url, tmp_path / "before") as before:
            asked = send(before.url, "book a table", "ctx-dinner")
            assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
            assert "For how many?" in reply_text(asked)
            before.kill()  # kill -9: nothing is written on the way out

        with serve(config, database_url, tmp_path / "after") as after:
            answered = send(after.url, "four of us", "ctx-dinner", task_id=asked["id"])
        assert answered["status"]["state"] == "TASK_STATE_COMPLETED", answered
        assert reply_text(answered) == "Hello, four of us!"  # the asker answered, not the default agent
        remote_tasks = [message.task_id for message in asker.recorder.wait_for_messages(2)]
        assert remote_tasks[1] and remote_tasks[1] == remote_tasks[0]  # its own task, continued


def test_the_answer_reaching_another_replica_goes_to_the_member_that_asked(database_url: str) -> None:
    """Two replicas on one database: the question asked through one, answered through the other."""
    with running_peer("asker", question="For how many?") as asker:
        config = CONFIG.format(asker_url=asker.url)
        shared: dict[str, Any] = {"redis_url": REDIS, "redis_prefix": f"ranch-test-{uuid.uuid4().hex[:8]}"}
        with (
            serve_ranch(config, database_url, **shared) as first,
            serve_ranch(config, database_url, **shared) as second,
        ):
            asked = send(first.url, "book a table", "ctx-lunch")
            assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
            answered = send(second.url, "two", "ctx-lunch", task_id=asked["id"])
            assert reply_text(answered) == "Hello, two!", answered
            again = send(first.url, "and a dessert menu", "ctx-lunch")  # back on the first: it reads
            assert reply_text(again) == "front took: and a dessert menu"  # the newer stored conversation


def test_a_conversation_restored_from_its_state_is_the_same_conversation() -> None:
    held = Conversation(max_bytes=1000)
    for speaker, text in [("user", "hello"), ("front", "héllo back"), ("user", "x" * 600), ("asker", "?")]:
        held.add(speaker, text)
    held.mark_seen("front")
    held.waiting_on = "asker"
    restored = Conversation(max_bytes=1000)
    restored.restore(3, json.loads(json.dumps(held.state())))  # as the database's JSON column keeps it
    assert restored.entries == held.entries and restored.size == held.size
    assert (restored.dropped, restored.seen, restored.waiting_on) == (held.dropped, held.seen, "asker")
    assert restored.unseen("asker", None) == held.unseen("asker", None) and restored.version == 3


def test_one_process_reads_back_what_it_dropped_and_skips_what_was_never_stored(tmp_path: Path) -> None:
    """A single process knows which conversations are stored: one it dropped from memory is read
    back whole; one never stored is not looked up (and a later start knows what the first stored)."""

    async def scenario() -> None:
        engine = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'c.db'}")
        await migrate.upgrade(engine)
        store = ConversationStore(engine)
        await store.open()
        held = Conversations(max_count=1)
        held.store = store
        first = held.get("org", "ctx-1")
        await held.refresh("desk", "org", "ctx-1", first)
        first.add("user", "remember me")
        await held.persist("desk", "org", "ctx-1", first)
        assert not store.may_hold("desk", "org", "ctx-2")
        held.get("org", "ctx-2")  # at most one in memory: ctx-1 is dropped
        again = held.get("org", "ctx-1")
        assert again is not first and again.entries == []
        await held.refresh("desk", "org", "ctx-1", again)
        assert again.entries == first.entries and again.version == first.version

        later = ConversationStore(engine)  # the next start
        await later.open()
        assert later.may_hold("desk", "org", "ctx-1") and not later.may_hold("desk", "org", "ctx-2")
        await engine.dispose()

    anyio.run(scenario)
