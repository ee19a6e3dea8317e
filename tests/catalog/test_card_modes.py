"""Cards tell the truth about media types: each kind's input and output modes (or the config's),
a remote agent's from its own card, a team's from its members; a part an agent does not take is
refused with A2A's unsupported-content error, through the official a2a-sdk client."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest
from a2a.types import Message, Part, Role
from a2a.utils.errors import ContentTypeNotSupportedError

from _support.hubkit import serve_ranch
from _support.peers import running_peer
from _support.sdk import sdk_client, send


def card(url: str, agent: str) -> dict[str, list[str]]:
    body = httpx.get(f"{url}/a2a/agents/{agent}/.well-known/agent-card.json", timeout=10).json()
    return {"in": body["defaultInputModes"], "out": body["defaultOutputModes"]}


def test_each_kind_lists_what_it_takes_and_a_team_what_its_members_do(tmp_path: Path) -> None:
    with running_peer("plain", input_modes=["text/plain", "application/pdf"]) as peer:
        config = f"""
agents:
  - {{id: greeter, kind: rules, rules: [{{reply: "hi"}}]}}
  - {{id: echo, kind: echo}}
  - {{id: reader, kind: remote, url: "{peer.url}"}}
  - id: seer
    kind: llm
    model: m
    base_url: http://127.0.0.1:9/v1
    api_key: sk-test
    input_modes: [text/plain, image/png, image/jpeg]
  - {{id: plain-llm, kind: llm, model: m, base_url: "http://127.0.0.1:9/v1", api_key: sk-test}}
  - {{id: coder, kind: python, entry: "_support.probes:Probe", output_modes: [text/plain, application/json]}}
teams:
  - {{id: desk, members: [reader, greeter, coder], default_agent: reader}}
"""
        with serve_ranch(config, tmp_path / "d.db", allow_private_outbound=True) as hub:
            assert card(hub.url, "greeter") == {"in": ["text/plain"], "out": ["text/plain"]}
            assert card(hub.url, "echo") == {"in": ["*/*"], "out": ["*/*"]}
            assert card(hub.url, "reader")["in"] == ["text/plain", "application/pdf"]  # its own card's
            assert card(hub.url, "seer")["in"] == ["text/plain", "image/png", "image/jpeg"]
            assert card(hub.url, "plain-llm") == {
                "in": ["text/plain", "application/json"],
                "out": ["text/plain"],
            }
            assert card(hub.url, "coder") == {"in": ["text/plain"], "out": ["text/plain", "application/json"]}
            # a team takes what its default agent takes, and answers with what any member may
            assert card(hub.url, "desk") == {
                "in": ["text/plain", "application/pdf"],
                "out": ["text/plain", "application/json"],
            }


def test_a_bad_mode_in_the_config_is_named(tmp_path: Path) -> None:
    from ranch.config import parse_config
    from ranch.exceptions import ConfigError

    with pytest.raises(ConfigError) as refused:
        parse_config("agents:\n  - {id: a, kind: echo, input_modes: [png]}\n")
    assert "input_modes" in str(refused.value)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a_part_the_agent_does_not_take_is_refused_as_unsupported_content(
    binding: str, tmp_path: Path
) -> None:
    config = "agents:\n  - {id: greeter, kind: rules, rules: [{reply: 'hi'}]}\n  - {id: echo, kind: echo}\n"
    pdf = Part(raw=b"%PDF-1.7", filename="a.pdf", media_type="application/pdf")
    with serve_ranch(config, tmp_path / "d.db") as hub:

        async def scenario() -> None:
            message = Message(role=Role.ROLE_USER, message_id="m1", parts=[Part(text="read this"), pdf])
            async with sdk_client(hub.agent_url("greeter"), binding=binding) as client:
                with pytest.raises(ContentTypeNotSupportedError) as refused:
                    await send(client, message)
                assert "message.parts[1] is application/pdf" in refused.value.message
                assert "text/plain" in refused.value.message
            async with sdk_client(hub.agent_url("echo"), binding=binding) as client:
                (answer,) = await send(client, message)
                assert [p.WhichOneof("content") for p in answer.message.parts] == ["text", "raw"]
                assert answer.message.parts[1].raw == b"%PDF-1.7"

        anyio.run(scenario)


def test_a_team_hands_a_member_a_note_in_place_of_a_part_it_does_not_take(tmp_path: Path) -> None:
    config = """
agents:
  - {id: echo, kind: echo}
  - {id: greeter, kind: rules, rules: [{reply: "Hello: {text}", route: user}]}
teams:
  - {id: desk, members: [echo, greeter], default_agent: echo, routes: {echo: greeter}}
"""
    pdf = Part(raw=b"%PDF-1.7", filename="a.pdf", media_type="application/pdf")
    with serve_ranch(config, tmp_path / "d.db") as hub:

        async def scenario() -> None:
            message = Message(role=Role.ROLE_USER, message_id="m1", parts=[Part(text="read this"), pdf])
            async with sdk_client(hub.agent_url("desk")) as client:
                (answer,) = await send(client, message)  # desk takes what echo takes: anything
            final = answer.task.status.message.parts or answer.task.artifacts[-1].parts
            text = "\n".join(part.text for part in final)
            assert "Hello: read this" in text
            assert "[ranch] a.pdf (application/pdf) is not shown: greeter does not take it" in text

        anyio.run(scenario)


def test_an_agent_that_takes_no_text_is_refused_text(tmp_path: Path) -> None:
    config = """
agents:
  - id: eye
    kind: python
    entry: "_support.probes:Probe"
    input_modes: ["image/*"]
    options: {reply: "seen"}
"""
    with serve_ranch(config, tmp_path / "d.db") as hub:
        assert card(hub.url, "eye")["in"] == ["image/*"]

        async def scenario() -> None:
            async with sdk_client(hub.agent_url("eye")) as client:
                with pytest.raises(ContentTypeNotSupportedError) as refused:
                    await send(client, Message(role=Role.ROLE_USER, message_id="m1", parts=[Part(text="hi")]))
                assert "message.parts[0] is text/plain" in refused.value.message
                picture = Part(raw=b"\x89PNG", media_type="image/png")
                (answer,) = await send(client, Message(role=Role.ROLE_USER, message_id="m2", parts=[picture]))
                assert answer.message.parts[0].text == "seen"

        anyio.run(scenario)
