from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from a2a.types import TaskState

from _support.hubkit import serve_ranch
from _support.sdk import sdk_client, send, trail_of, user_message
from ranch.cli.demo import DEMO_YAML


def test_demo_team_answers_over_jsonrpc(tmp_path: Path) -> None:
    with serve_ranch(DEMO_YAML, tmp_path / "t.db") as ranch:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "find papers on x"}]}
            },
        }
        response = httpx.post(ranch.agent_url("helpdesk"), json=body, headers={"A2A-Version": "1.0"})
        task = response.json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.anyio
async def test_sdk_client_both_bindings_both_versions(tmp_path: Path) -> None:
    with serve_ranch(DEMO_YAML, tmp_path / "t.db") as ranch:
        for binding in ("JSONRPC", "HTTP+JSON"):
            for version, header in (("1.0", True), ("0.3", True), ("0.3", False)):
                async with sdk_client(
                    ranch.agent_url("helpdesk"), binding=binding, version=version, send_version_header=header
                ) as client:
                    [response] = await send(client, user_message("find papers on x"))
                    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED, (
                        binding,
                        version,
                        header,
                    )
                    assert [hop["agent"] for hop in trail_of(response.task)] == [
                        "triage",
                        "researcher",
                        "triage",
                    ]
