"""The image URLs a message carries are the caller's: an llm agent reads them through guarded
connections, whoever owns the agent, and tells its model only that one could not be read.

A real `ranch serve` (its own process, so none of this test process's fences apply to it) with
config agents, the scripted model (tests/_support/fake_openai.py), and an "internal service" on
127.0.0.1 that counts every request reaching it (tests/_support/faulty.py).
"""

from __future__ import annotations

import base64
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from _support.fake_openai import FakeOpenAI, text
from _support.faulty import SECRET_PNG, Internal, not_http, running_faulty
from _support.servers import ServerProcess, free_port

ADMIN = "rk_test_admin_images_0123456789"
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}
CONFIG = """
agents:
  - {{id: vision, kind: llm, model: vision, base_url: "{base_url}", stream: false, retry_count: 0,
     input_modes: [text/plain, "image/*"]}}
  - {{id: inhouse, kind: llm, model: inhouse, base_url: "{base_url}", stream: false, retry_count: 0,
     input_modes: [text/plain, "image/*"], fetch_private_urls: true}}
"""


@dataclass
class Served:
    url: str
    tenant: dict[str, str]
    """A fresh organization's owner: any caller of the config's (global) agents."""
    internal: Internal
    server: ServerProcess


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, provider: tuple[FakeOpenAI, str]) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("images")
    config = folder / "ranch.yaml"
    config.write_text(CONFIG.format(base_url=provider[1]))
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--auth", "keys"]
    command += ["--db", f"sqlite+aiosqlite:///{folder / 'hub.db'}", "--log-level", "debug"]
    env = {**os.environ, "RANCH_ADMIN_KEY": ADMIN}
    with (
        running_faulty() as faulty,
        ServerProcess(command, port, env=env, log_path=folder / "serve.log", name="ranch") as server,
    ):
        created = httpx.post(
            f"{server.url}/api/v1/organizations", json={"id": "mallory"}, headers={"X-API-Key": ADMIN}
        )
        assert created.status_code == 201, created.text
        tenant = {"X-API-Key": created.json()["owner"]["api_key"]}
        yield Served(server.url, tenant, faulty.internal, server)


def show(served: Served, agent: str, fake: FakeOpenAI, urls: list[str]) -> list[dict[str, Any]]:
    """Send "describe" and these image URLs to `agent` as the tenant: what its model was shown."""
    fake.script(agent, text("described"))
    parts = [{"text": "describe"}, *({"url": url, "mediaType": "image/png"} for url in urls)]
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": parts}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = httpx.post(
        f"{served.url}/a2a/agents/{agent}", json=body, headers={**V1, **served.tenant}, timeout=60
    )
    assert answer.status_code == 200, answer.text
    status = answer.json()["result"]["task"]["status"]
    assert status["state"] == "TASK_STATE_COMPLETED", answer.text
    assert status["message"]["parts"][0]["text"] == "described", answer.text
    (asked,) = fake.requests_for(agent)
    content = asked["messages"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


def unread(url: str) -> str:
    return f"[the image {url} could not be read]"


def test_a_caller_cannot_make_a_config_agent_reach_an_internal_address(
    served: Served, fake: FakeOpenAI
) -> None:
    port = int(served.internal.url.rsplit(":", 1)[1])
    inward = [
        f"http://127.0.0.1:{port}/internal/secret.png",
        f"http://2130706433:{port}/internal/secret.png",
        f"http://[::ffff:127.0.0.1]:{port}/internal/secret.png",
        f"http://0.0.0.0:{port}/internal/secret.png",
    ]
    closed = f"http://127.0.0.1:{free_port()}/gone.png"
    shown = show(served, "vision", fake, [*inward, closed])
    assert served.internal.hits == []
    assert [item["type"] for item in shown] == ["text"]  # no image reached the model
    said = shown[0]["text"]
    for url in [*inward, closed]:  # an open port and a closed one read the same
        assert unread(url) in said, said
    assert said.count("could not be read") == 5 and "loopback" not in said and "refus" not in said, said


def test_an_operator_opts_in_to_internal_image_urls_and_learns_nothing_more_from_failures(
    served: Served, fake: FakeOpenAI
) -> None:
    internal = served.internal.url
    port = int(internal.rsplit(":", 1)[1])
    with not_http() as silent:
        failing = [
            f"http://127.0.0.1:{free_port()}/gone.png",  # closed
            f"http://127.0.0.1:{silent}/db.png",  # open, not HTTP
            f"{internal}/forbidden/secret.png?sig=s3cret",  # HTTP 403
            f"http://0.0.0.0:{port}/internal/unspecified.png",  # never an address to call
        ]
        shown = show(served, "inhouse", fake, [f"{internal}/internal/secret.png?token=s3cret", *failing])
    data_url = f"data:image/png;base64,{base64.b64encode(SECRET_PNG).decode()}"
    assert shown[1:] == [{"type": "image_url", "image_url": {"url": data_url}}]  # read, sent as bytes
    said = shown[0]["text"]
    for url in failing:
        assert unread(url) in said, said
    assert said.count("could not be read") == 4, said
    assert served.internal.hits == [("GET", "/internal/secret.png"), ("GET", "/forbidden/secret.png")]
    served.internal.hits.clear()
    # why goes to the server's log (at DEBUG), without a URL's query
    logged = [line for line in served.server.output().splitlines() if "agent inhouse: the image" in line]
    assert len(logged) == 4 and any("HTTP 403" in line for line in logged), logged
    assert any("refusing to connect to 0.0.0.0" in line for line in logged), logged
    assert not any("s3cret" in line for line in logged), logged


def test_an_organization_may_not_opt_in(served: Served, base_url: str) -> None:
    body = {"id": "peek", "kind": "llm", "model": "m", "base_url": base_url, "fetch_private_urls": True}
    refused = httpx.post(f"{served.url}/api/v1/agents", json=body, headers=served.tenant)
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["field"] == "fetch_private_urls", refused.text
