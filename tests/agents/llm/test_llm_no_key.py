"""An llm agent with no key configured sends no `Authorization` header at all (docs/llm.md, issue 40):
not `Bearer no-key`, which a local server ignores but a proxy in front of it may log or refuse. A
header the config gives itself (a gateway's own scheme) is sent as given."""

from __future__ import annotations

import pytest

from _support.fake_openai import FakeOpenAI, text
from _support.sdk import user_message
from ranch.agents.base import Call
from ranch.agents.fold import collect
from ranch.agents.llm import LlmAgent
from ranch.catalog.build import build_agent
from ranch.config import parse_config
from ranch.wire.client import ClientPool

pytestmark = pytest.mark.anyio


def llm_agent(base_url: str, extra: str = "") -> LlmAgent:
    yaml = f"agents:\n  - {{id: local, kind: llm, model: solo, base_url: {base_url}{extra}}}\n"
    agent = build_agent(parse_config(yaml).agents[0], ClientPool())
    assert isinstance(agent, LlmAgent)
    return agent


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
async def test_no_key_configured_sends_no_authorization_header(
    fake: FakeOpenAI, base_url: str, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    fake.script("solo", text("ok"))
    async with llm_agent(base_url, f", stream: {str(stream).lower()}") as agent:
        await collect(agent, user_message("hi"), Call())
    assert "authorization" not in fake.headers[-1]


async def test_a_configured_authorization_header_is_sent_as_given(fake: FakeOpenAI, base_url: str) -> None:
    fake.script("solo", text("ok"))
    async with llm_agent(base_url, ", headers: {Authorization: 'Token gw-7'}") as agent:
        await collect(agent, user_message("hi"), Call())
    assert fake.headers[-1]["authorization"] == "Token gw-7"
