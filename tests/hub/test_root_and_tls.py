"""What a deployment shows: honest card capabilities, one agent at the root, HTTPS (docs/surface.md).

- an agent that answers inline with one Message (echo, rules) does not offer push notifications,
  and a push config sent to it is refused with PushNotificationNotSupported;
- `--root AGENT_ID` serves that agent's card and bindings at the root, everything else stays;
- `--ssl-certfile/--ssl-keyfile` serve HTTPS, and cards then advertise https URLs.
"""

from __future__ import annotations

import ssl
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.types import GetTaskRequest, ListTasksRequest, Task, TaskState

from _support.hubkit import serve_ranch
from _support.sdk import sdk_client, send, user_message
from _support.servers import ServerProcess, free_port
from _support.tls import self_signed
from ranch.config import parse_config
from ranch.exceptions import ConfigError
from ranch.hub.app import Settings, create_app

YAML = """
agents:
  - {id: echo, kind: echo}
  - id: triage
    kind: rules
    rules: [{reply: "noted", route: user}]
teams:
  - id: desk
    members: [echo]
    default_agent: echo
"""

V1 = {"A2A-Version": "1.0"}
TIMEOUT = 20.0
PUSH_NOT_SUPPORTED = -32003
HOOK = {"url": "http://127.0.0.1:9/hook"}


def message_json(text: str = "hello") -> dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": text}]}


def rpc(url: str, method: str, params: dict[str, Any], **client: Any) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(url, json=body, headers=V1, timeout=TIMEOUT, **client)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def interface_urls(card: dict[str, Any]) -> set[str]:
    return {i["url"] for i in card["supportedInterfaces"] if not i.get("tenant")}  # (not /a2a, gRPC)


# -- push notifications, per kind ------------------------------------------------------------------


def test_agents_that_answer_inline_do_not_offer_push_notifications(tmp_path: Path) -> None:
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        for agent, offered in (("echo", False), ("triage", False), ("desk", True)):
            card = httpx.get(f"{ranch.agent_url(agent)}/.well-known/agent-card.json", timeout=TIMEOUT).json()
            assert card["capabilities"].get("pushNotifications", False) is offered, (agent, card)

        inline = {"message": message_json(), "configuration": {"taskPushNotificationConfig": HOOK}}
        refused = rpc(ranch.agent_url("echo"), "SendMessage", inline)
        assert refused.get("error", {}).get("code") == PUSH_NOT_SUPPORTED, refused
        assert "agent 'echo'" in refused["error"]["message"]
        created = rpc(ranch.agent_url("triage"), "CreateTaskPushNotificationConfig", {"taskId": "t1", **HOOK})
        assert created.get("error", {}).get("code") == PUSH_NOT_SUPPORTED, created

        rest = httpx.post(f"{ranch.agent_url('echo')}/message:send", json=inline, headers=V1, timeout=TIMEOUT)
        assert rest.status_code == 400, rest.text
        assert rest.json()["error"]["details"][0]["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"

        plain = rpc(ranch.agent_url("echo"), "SendMessage", {"message": message_json("still here")})
        assert plain["result"]["message"]["parts"] == [{"text": "still here"}]


# -- --root ----------------------------------------------------------------------------------------


async def ask_at(url: str, binding: str) -> tuple[Task, list[str]]:
    """SendMessage, GetTask and ListTasks through an SDK client resolved from the card at `url`."""
    async with sdk_client(url, binding=binding) as client:
        with anyio.fail_after(TIMEOUT):
            [answer] = await send(client, user_message(f"over {binding}"))
            task = await client.get_task(GetTaskRequest(id=answer.task.id))
            listed = await client.list_tasks(ListTasksRequest())
    return task, [t.id for t in listed.tasks]


def test_root_serves_one_agent_card_and_bindings_at_the_root(tmp_path: Path) -> None:
    with serve_ranch(YAML, tmp_path / "t.db", root="desk") as ranch:
        for name in ("agent-card.json", "agent.json"):
            card = httpx.get(f"{ranch.url}/.well-known/{name}", timeout=TIMEOUT).json()
            assert card["name"] == "desk" and interface_urls(card) == {ranch.url}, card
        at_home = httpx.get(f"{ranch.agent_url('desk')}/.well-known/agent-card.json", timeout=TIMEOUT).json()
        assert interface_urls(at_home) == {ranch.agent_url("desk")}, "everything else stays where it is"

        for binding in ("JSONRPC", "HTTP+JSON"):  # resolved from the root card, as a TCK would
            task, listed = anyio.run(ask_at, ranch.url, binding)
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
            assert task.id in listed

        same = rpc(ranch.agent_url("desk"), "GetTask", {"id": task.id})
        assert same["result"]["id"] == task.id, "the root and /a2a/agents/desk are one agent"
        unknown = rpc(f"{ranch.url}/", "Nope", {})
        assert unknown["error"]["code"] == -32601, unknown
        echo = rpc(ranch.agent_url("echo"), "SendMessage", {"message": message_json("hi")})
        assert echo["result"]["message"]["parts"] == [{"text": "hi"}]
        assert httpx.get(f"{ranch.url}/healthz", timeout=TIMEOUT).status_code == 200


def test_root_must_name_an_agent_of_the_config(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 't.db'}", root="nobody")
    with pytest.raises(ConfigError, match="--root nobody: no agent or team 'nobody'"):
        create_app(parse_config(YAML), settings)


# -- HTTPS -----------------------------------------------------------------------------------------


def test_serve_over_https_with_a_certificate(tmp_path: Path) -> None:
    certfile, keyfile = self_signed(tmp_path)
    trusted = ssl.create_default_context(cafile=str(certfile))
    config = tmp_path / "ranch.yaml"
    config.write_text(YAML)
    port = free_port()
    command = [
        *(sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--root", "desk"),
        *("--db", f"sqlite+aiosqlite:///{tmp_path / 't.db'}", "--log-level", "warning"),
        *("--ssl-certfile", str(certfile), "--ssl-keyfile", str(keyfile)),
    ]
    with ServerProcess(
        command, port, scheme="https", verify=trusted, log_path=tmp_path / "serve.log"
    ) as server:
        base = f"https://127.0.0.1:{port}"
        assert server.url == base and f"ranch is serving your config at {base}" in server.output()
        root_card = httpx.get(f"{base}/.well-known/agent-card.json", verify=trusted, timeout=TIMEOUT).json()
        assert interface_urls(root_card) == {base}
        card = httpx.get(
            f"{base}/a2a/agents/desk/.well-known/agent-card.json", verify=trusted, timeout=TIMEOUT
        )
        assert interface_urls(card.json()) == {f"{base}/a2a/agents/desk"}
        answer = rpc(f"{base}/", "SendMessage", {"message": message_json("secret")}, verify=trusted)
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        with pytest.raises(httpx.ConnectError):  # a client that does not trust the certificate
            httpx.get(f"{base}/healthz", timeout=TIMEOUT)


def test_serve_refuses_half_a_tls_setup(tmp_path: Path) -> None:
    certfile, _ = self_signed(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "ranch", "serve", "--ssl-certfile", str(certfile), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "--ssl-keyfile is required too" in done.stderr
