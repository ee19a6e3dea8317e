"""Durable turns with a local model: its hop in flight when the server was killed (`kill -9`) follows
the agent's `resume` setting once the server is back (SQLite, one process restarted): run again,
skipped (the default agent is told it was lost, and what it did is unknown), or the turn fails.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from _support import TESTS
from _support.databases import migrated_sqlite
from _support.fake_openai import FakeOpenAI, text
from _support.hubkit import wait_until
from _support.servers import ServerProcess, free_port

TAKEN_OVER = 30.0
"""Seconds the turn may take to end once the server is back: the lease (1 s), a take-over round and
room for a loaded machine."""


def serve(config: Path, database_url: str, log: Path) -> ServerProcess:
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--db", database_url]
    command += ["--lease", "1", "--allow-private-outbound"]
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    return ServerProcess(command, port, env=env, log_path=log.with_suffix(f".{port}.log"))


def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer: dict[str, Any] = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=30).json()
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result


LLM_TEAM = """
agents:
  - id: desk
    kind: rules
    rules:
      - {{match: "thought again|in flight", reply: "desk heard: {{text}}", route: user}}
      - {{reply: "to the thinker", route: thinker}}
  - id: thinker
    kind: llm
    model: slowpoke
    base_url: {base_url}
    api_key: sk-test
    {resume}
teams:
  - {{id: pair, members: [desk, thinker], default_agent: desk, timeout: 120}}
"""


@pytest.mark.parametrize("resume", ["rerun", "skip", "fail"])
def test_a_local_model_hop_in_flight_follows_its_resume_setting(
    resume: str, tmp_path: Path, provider: tuple[FakeOpenAI, str]
) -> None:
    fake, base_url = provider
    fake.reset()
    fake.script("slowpoke", text("never finished", delay=60), text("thought again"))
    config = tmp_path / "pair.yaml"
    config.write_text(LLM_TEAM.format(base_url=base_url, resume=f"resume: {resume}"))
    database_url = f"sqlite+aiosqlite:///{migrated_sqlite(tmp_path / 'hub.db')}"
    with serve(config, database_url, tmp_path / "first") as first:
        message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "think"}]}
        params = {"message": message, "configuration": {"returnImmediately": True}}
        task_id = rpc(f"{first.url}/a2a/agents/pair", "SendMessage", params)["task"]["id"]
        wait_until(lambda: fake.requests_for("slowpoke"), what="the model's first call")
        first.kill()
    with serve(config, database_url, tmp_path / "second") as second:

        def ended() -> dict[str, Any] | None:
            task = rpc(f"{second.url}/a2a/agents/pair", "GetTask", {"id": task_id})
            return task if task["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED") else None

        task = wait_until(ended, timeout=TAKEN_OVER, what="the resumed turn's end")
    said = task["status"]["message"]["parts"][0]["text"]
    calls = len(fake.requests_for("slowpoke"))
    if resume == "rerun":
        assert task["status"]["state"] == "TASK_STATE_COMPLETED" and calls == 2
        assert said.startswith("desk heard:") and "thought again" in said, said
    elif resume == "skip":
        assert task["status"]["state"] == "TASK_STATE_COMPLETED" and calls == 1
        assert said.startswith("desk heard:") and "thinker's hop was in flight" in said, said
    else:
        assert task["status"]["state"] == "TASK_STATE_FAILED" and calls == 1
        assert "thinker" in said and "resume: fail" in said, said
