"""The official JavaScript client (@a2a-js/sdk with @grpc/grpc-js, pinned in bench/js) calls a team over
gRPC: it finds the card's GRPC interface, sends its tenant, and gets the team's completed task."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from _support.hubkit import ADMIN_KEY, RunningRanch, serve_ranch
from _support.jsnode import JS, needs
from ranch.cli.demo import DEMO_YAML


def js_send(hub: RunningRanch, agent_id: str, text: str, *key: str) -> dict[str, Any]:
    done = subprocess.run(
        ["node", str(JS / "grpc-send.mjs"), hub.agent_url(agent_id), text, *key],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


@needs("@grpc/grpc-js")
@pytest.mark.parametrize("auth", ["off", "keys"])
def test_the_js_grpc_client_calls_a_team(tmp_path: Path, auth: str) -> None:
    with serve_ranch(DEMO_YAML, tmp_path / "t.db", grpc_port=0, auth=auth) as hub:
        key = (ADMIN_KEY,) if auth == "keys" else ()
        out = js_send(hub, "helpdesk", "find papers on quantum error correction", *key)
    assert out["interface"]["tenant"] == "helpdesk"
    task = out["answer"]
    assert task["status"]["state"] in ("TASK_STATE_COMPLETED", 3), task["status"]
    assert "Research notes" in json.dumps(task["status"]["message"])
