"""A server killed mid-task: finished tasks survive, an unfinished agent task is failed with a reason
(a team turn resumes instead: tests/routing/test_resumed_turns.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx

from _support import TESTS
from _support.sdk import as_json, user_message
from _support.servers import ServerProcess, free_port

CONFIG = """
agents:
  - {id: quick, kind: echo}
  - id: slow
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 60}
teams:
  - {id: brisk, members: [quick], default_agent: quick}
"""


def rpc(url: str, method: str, params: dict[str, object]) -> dict[str, object]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=10)
    data: dict[str, object] = response.json()
    return data


def message(text: str) -> dict[str, object]:
    return {"message": as_json(user_message(text))}


def serve(config: Path, db: Path, port: int) -> ServerProcess:
    command = [
        sys.executable,
        "-m",
        "ranch",
        "serve",
        str(config),
        "--port",
        str(port),
        "--db",
        f"sqlite+aiosqlite:///{db}",
    ]
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    return ServerProcess(command, port, env=env, log_path=db.with_suffix(f".{port}.log"))


def test_sigkill_mid_task_keeps_finished_tasks_and_fails_the_working_one(tmp_path: Path) -> None:
    config = tmp_path / "team.yaml"
    config.write_text(CONFIG)
    db = tmp_path / "ranch.db"
    with serve(config, db, free_port()) as first:
        done = rpc(f"{first.url}/a2a/agents/brisk", "SendMessage", message("still here?"))["result"]["task"]  # type: ignore[index]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        params = {**message("take your time"), "configuration": {"returnImmediately": True}}
        working = rpc(f"{first.url}/a2a/agents/slow", "SendMessage", params)["result"]["task"]  # type: ignore[index]
        assert working["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        first.kill()
    with serve(config, db, free_port()) as second:
        kept = rpc(f"{second.url}/a2a/agents/brisk", "GetTask", {"id": done["id"]})["result"]
        assert kept["status"]["state"] == "TASK_STATE_COMPLETED"  # type: ignore[index]
        assert kept["status"]["message"]["parts"][0]["text"] == "still here?"  # type: ignore[index]
        failed = rpc(f"{second.url}/a2a/agents/slow", "GetTask", {"id": working["id"]})["result"]
        assert failed["status"]["state"] == "TASK_STATE_FAILED"  # type: ignore[index]
        reason = failed["status"]["message"]["parts"][0]["text"]  # type: ignore[index]
        assert "stopped before it finished" in reason and "replica" in reason
        assert failed["history"][0]["parts"][0]["text"] == "take your time"  # type: ignore[index]
        listed = rpc(f"{second.url}/a2a/agents/slow", "ListTasks", {})["result"]["tasks"]  # type: ignore[index]
        assert [task["id"] for task in listed] == [working["id"]]
