"""`kind: llm` in the config: every problem names the agent; the key stays out of cards and reprs."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from _support.hubkit import serve_ranch
from ranch.config import LlmAgentConfig, parse_config
from ranch.exceptions import ConfigError


def problems(yaml: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(yaml)
    return caught.value.problems


def test_each_problem_names_the_llm_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    found = problems(
        """
agents:
  - {id: a, kind: llm}
  - {id: b, kind: llm, model: m, api_key: x, api_key_env: Y}
  - {id: c, kind: llm, model: m, api_key_env: NOT_SET_ANYWHERE}
  - {id: d, kind: llm, model: m, mcp_servers: [{name: s}, {name: t, url: "ftp://x"}], tempreature: 1}
  - {id: e, kind: llm, model: m, mcp_servers: [{name: s, command: x}, {name: s, command: y}]}
  - {id: f, kind: lm}
"""
    )
    assert found and all(line[:2] in {"a:", "b:", "c:", "d:", "e:", "f:"} for line in found)
    assert "a: model: Field required" in found
    assert any(line.startswith("b: ") and "api_key or api_key_env, not both" in line for line in found)
    assert "c: api_key_env: environment variable NOT_SET_ANYWHERE is not set" in found
    assert "d: mcp_servers.0.stdio.command: Field required" in found
    assert any(line.startswith("d: mcp_servers.1.http.url") for line in found)
    assert "d: tempreature: Extra inputs are not permitted" in found
    assert "e: mcp_servers: the name 's' is used twice" in found
    assert "f: unknown kind 'lm'; expected one of rules, echo, remote, llm, python" in found


def test_a_full_llm_entry_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEY_FOR_TEST", "sk-hidden")
    config = parse_config(
        """
agents:
  - id: writer
    kind: llm
    model: llama3.2
    base_url: http://localhost:11434/v1
    api_key: ${KEY_FOR_TEST}
    temperature: 0.2
    max_tokens: 500
    max_tool_rounds: 3
    mcp_servers:
      - {name: files, command: npx, args: [-y, some-server], env: {ROOT: /tmp}}
      - {name: search, url: "http://127.0.0.1:9000/mcp", headers: {Authorization: Bearer t}}
    remote_agents: ["http://127.0.0.1:9001", {name: helper, url: "http://127.0.0.1:9002"}]
"""
    )
    agent = config.agents[0]
    assert isinstance(agent, LlmAgentConfig)
    assert agent.api_key is not None and agent.api_key.get_secret_value() == "sk-hidden"
    assert "sk-hidden" not in repr(config) and "sk-hidden" not in str(agent.model_dump())
    assert [server.name for server in agent.mcp_servers] == ["files", "search"]


def test_the_card_and_listing_of_an_llm_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEY_FOR_TEST", "sk-hidden")
    yaml = """
agents:
  - {id: writer, kind: llm, model: m, base_url: "http://127.0.0.1:9/v1", api_key: "${KEY_FOR_TEST}",
     description: Writes}
"""
    with serve_ranch(yaml, tmp_path / "t.db") as ranch, httpx.Client(timeout=10) as http:
        card = http.get(f"{ranch.agent_url('writer')}/.well-known/agent-card.json")
        listing = http.get(f"{ranch.url}/a2a/agents").json()
    assert "sk-hidden" not in card.text
    uris = [ext["uri"] for ext in card.json()["capabilities"]["extensions"]]
    assert uris == ["https://ranch.woi.dev/extensions/client-routing/v1"]
    assert listing["agents"][0]["kind"] == "llm"
