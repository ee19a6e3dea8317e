"""Durable turns with a local model: its hop in flight when the server was killed (`kill -9`) follows
the agent's `resume` setting once the server is back (SQLite, one process restarted): run again,
skipped (the default agent is told it was lost, and what it did is unknown), or the turn fails.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from _support.databases import migrated_sqlite
from _support.fake_openai import FakeOpenAI, text
from _support.hubkit import wait_until
from _support.killable import killable_serve, rpc

TAKEN_OVER = 30.0
"""Seconds the turn may take to end once the server is back: the lease (1 s), a take-over round and
room for a loaded machine."""


SETTINGS = ("rerun", "skip", "fail")


def config(base_url: str) -> str:
    """A team per `resume` setting (`pair-rerun`, ...), each a rules desk and a model thinker (its own
    model name, so the fake answers each alone)."""
    agents, teams = [], []
    for resume in SETTINGS:
        agents.append(
            f"""  - id: desk-{resume}
    kind: rules
    rules:
      - {{match: "thought again|in flight", reply: "desk heard: {{text}}", route: user}}
      - {{reply: "to the thinker", route: thinker-{resume}}}
  - id: thinker-{resume}
    kind: llm
    model: slow-{resume}
    base_url: {base_url}
    api_key: sk-test
    resume: {resume}
"""
        )
        members = f"[desk-{resume}, thinker-{resume}]"
        teams.append(
            f"  - {{id: pair-{resume}, members: {members}, default_agent: desk-{resume}, timeout: 120}}\n"
        )
    return "agents:\n" + "".join(agents) + "teams:\n" + "".join(teams)


def test_a_local_model_hop_in_flight_follows_its_resume_setting(
    tmp_path: Path, provider: tuple[FakeOpenAI, str]
) -> None:
    """Three turns in flight at once, one per setting, the server killed once."""
    fake, base_url = provider
    fake.reset()
    for resume in SETTINGS:
        fake.script(f"slow-{resume}", text("never finished", delay=60), text("thought again"))
    path = tmp_path / "pairs.yaml"
    path.write_text(config(base_url))
    database_url = f"sqlite+aiosqlite:///{migrated_sqlite(tmp_path / 'hub.db')}"
    tasks: dict[str, str] = {}
    with killable_serve(path, database_url, tmp_path / "first") as first:
        for resume in SETTINGS:
            message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "think"}]}
            params = {"message": message, "configuration": {"returnImmediately": True}}
            tasks[resume] = rpc(f"{first.url}/a2a/agents/pair-{resume}", "SendMessage", params)["task"]["id"]
        wait_until(
            lambda: all(fake.requests_for(f"slow-{resume}") for resume in SETTINGS),
            what="the models' first calls",
        )
        first.kill()
    ended: dict[str, dict[str, Any]] = {}
    with killable_serve(path, database_url, tmp_path / "second") as second:

        def all_ended() -> bool:
            for resume in SETTINGS:
                task = rpc(f"{second.url}/a2a/agents/pair-{resume}", "GetTask", {"id": tasks[resume]})
                if task["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED"):
                    ended[resume] = task
            return len(ended) == len(SETTINGS)

        wait_until(all_ended, timeout=TAKEN_OVER, what="the resumed turns' ends")
    said = {resume: task["status"]["message"]["parts"][0]["text"] for resume, task in ended.items()}
    state = {resume: task["status"]["state"] for resume, task in ended.items()}
    calls = {resume: len(fake.requests_for(f"slow-{resume}")) for resume in SETTINGS}
    assert (state["rerun"], calls["rerun"]) == ("TASK_STATE_COMPLETED", 2)  # asked again
    assert said["rerun"].startswith("desk heard:") and "thought again" in said["rerun"], said
    assert (state["skip"], calls["skip"]) == ("TASK_STATE_COMPLETED", 1)  # the desk told it was lost
    assert said["skip"].startswith("desk heard:") and "thinker-skip's hop was in flight" in said["skip"], said
    assert (state["fail"], calls["fail"]) == ("TASK_STATE_FAILED", 1)
    assert "thinker-fail" in said["fail"] and "resume: fail" in said["fail"], said
