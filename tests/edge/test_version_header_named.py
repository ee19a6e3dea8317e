"""An A2A 1.0 call sent without `A2A-Version` is read as A2A 0.3 (docs/policies.md): its error names
the missing header (issue 40), where the SDK's said "A2A version '0.3' is not supported", as if the
caller had asked for 0.3. On both bindings, and a 0.3 call without the header still works."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from _support.hubkit import RunningRanch, serve_ranch
from ranch.cli.demo import DEMO_YAML

MESSAGE = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "write a note"}]}


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with serve_ranch(DEMO_YAML, tmp_path_factory.mktemp("versions") / "t.db") as served:
        yield served


def test_jsonrpc_without_the_header_names_it(hub: RunningRanch) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": MESSAGE}}
    answer = httpx.post(hub.agent_url("helpdesk"), json=body, timeout=10).json()
    message = answer["error"]["message"]
    assert answer["error"]["code"] == -32009
    assert message.startswith("the A2A-Version header is missing: SendMessage is an A2A 1.0 method")
    assert "send 'A2A-Version: 1.0'" in message and "'0.3' is not supported" not in message


def test_http_json_without_the_header_names_it(hub: RunningRanch) -> None:
    answer = httpx.post(f"{hub.agent_url('helpdesk')}/message:send", json={"message": MESSAGE}, timeout=10)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"].startswith("the A2A-Version header is missing")


def test_with_the_header_or_a_03_method_nothing_changes(hub: RunningRanch) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": MESSAGE}}
    served = httpx.post(hub.agent_url("helpdesk"), json=body, headers={"A2A-Version": "1.0"}, timeout=10)
    assert served.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    old = {"role": "user", "messageId": "m2", "parts": [{"kind": "text", "text": "write a note"}]}
    body03 = {"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": old}}
    answer = httpx.post(hub.agent_url("helpdesk"), json=body03, timeout=10).json()
    assert answer["result"]["status"]["state"] == "completed"
