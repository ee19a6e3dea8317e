"""The official JavaScript client (@a2a-js/sdk, pinned in bench/js) lists a context's tasks on both
bindings. Over JSON-RPC it sends its unset `status` enum as `"UNRECOGNIZED"`, which, like the proto's
own `TASK_STATE_UNSPECIFIED`, means no filter; any other value that names no state is still refused."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import anyio
import httpx
import pytest
from a2a.types import Message, Part, Role

from _support.hubkit import serve_ranch
from _support.jsnode import JS, needs
from _support.sdk import sdk_client, send

CONFIG = """
agents:
  - {id: greeter, kind: rules, rules: [{reply: "hello"}]}
teams:
  - {id: desk, members: [greeter], default_agent: greeter}
"""


@needs("@a2a-js/sdk")
@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_the_js_clients_list_tasks_finds_the_contexts_tasks(binding: str, tmp_path: Path) -> None:
    context_id = uuid.uuid4().hex
    with serve_ranch(CONFIG, tmp_path / "d.db") as hub:

        async def one_task() -> str:
            message = Message(
                role=Role.ROLE_USER,
                message_id=uuid.uuid4().hex,
                parts=[Part(text="hi")],
                context_id=context_id,
            )
            async with sdk_client(hub.agent_url("desk")) as client:
                (answer,) = await send(client, message)
            return answer.task.id  # a team's turn is a task

        task_id = anyio.run(one_task)
        listed = subprocess.run(
            ["node", str(JS / "list-tasks.mjs"), hub.agent_url("desk"), binding, context_id],
            cwd=JS,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout) == {"tasks": [task_id]}


@pytest.mark.parametrize("status", ["UNRECOGNIZED", "TASK_STATE_UNSPECIFIED", 0])
def test_the_unset_state_spellings_mean_no_filter_and_others_are_refused(
    status: str | int, tmp_path: Path
) -> None:
    with serve_ranch(CONFIG, tmp_path / "d.db") as hub:

        def list_tasks(value: str | int) -> dict[str, object]:
            body = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"status": value}}
            headers = {"A2A-Version": "1.0"}
            return dict(httpx.post(hub.agent_url("desk"), json=body, headers=headers, timeout=10).json())

        def list_over_rest(value: str | int) -> httpx.Response:
            params = {"status": str(value)}
            return httpx.get(f"{hub.agent_url('desk')}/tasks", params=params, headers={"A2A-Version": "1.0"})

        assert "result" in list_tasks(status), list_tasks(status)
        assert list_over_rest(status).json()["tasks"] == []
        refused = list_tasks("TASK_STATE_NOPE")
        assert refused["error"]["code"] == -32602  # type: ignore[index]
        assert "status: 'TASK_STATE_NOPE' is not a task state" in refused["error"]["message"]  # type: ignore[index]
        assert list_over_rest("TASK_STATE_NOPE").status_code == 400
