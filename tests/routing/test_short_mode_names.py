"""A remote member whose card lists the short mode names many A2A agents and samples use
(`defaultInputModes: ["text"]`) takes text: a team hands it the previous member's message, not a
note that it does not take it (docs/api.md, "Media types"). The peer is the official a2a-sdk server."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from a2a.types import Message, Part, Role

from _support.hubkit import serve_ranch
from _support.peers import running_peer
from _support.sdk import sdk_client, send


@pytest.mark.parametrize("listed", [["text"], ["text", "text/plain"], ["TEXT"]])
def test_a_member_listing_text_gets_the_previous_members_text(listed: list[str], tmp_path: Path) -> None:
    with running_peer("plain", name="plain", input_modes=listed) as peer:
        config = f"""
agents:
  - {{id: greeter, kind: rules, rules: [{{reply: "Hello: {{text}}", route: plain, reason: greeted}}]}}
  - {{id: plain, kind: remote, url: "{peer.url}"}}
teams:
  - {{id: desk, members: [greeter, plain], default_agent: greeter, routes: {{plain: user}}}}
  - {{id: front, members: [plain, greeter], default_agent: plain}}
"""
        with serve_ranch(config, tmp_path / "d.db", allow_private_outbound=True) as hub:

            async def scenario(team: str, text: str) -> str:
                message = Message(role=Role.ROLE_USER, message_id=f"m-{team}", parts=[Part(text=text)])
                async with sdk_client(hub.agent_url(team)) as client:
                    (answer,) = await send(client, message)
                final = answer.task.status.message.parts or answer.task.artifacts[-1].parts
                return "\n".join(part.text for part in final)

            said = anyio.run(scenario, "desk", "good morning")
            (received,) = peer.recorder.wait_for_messages(1)
            assert "Hello: good morning" in received.text
            assert "is not shown" not in received.text
            assert said == "plain saw: " + received.text

            said = anyio.run(scenario, "front", "straight in")  # the caller's own text, to a default agent
            assert "straight in" in peer.recorder.wait_for_messages(2)[1].text, said
