"""A team streams its members' text as it comes: each hop's artifact grows chunk by chunk
(append, lastChunk as the A2A spec has them) before the hop's whole reply, through the official
a2a-sdk client; in a room, the member's text grows live under the member's own execution."""

from __future__ import annotations

import uuid
from pathlib import Path

import anyio
from a2a.types import Message, Part, Role, SendMessageRequest

from _support.fake_openai import FakeOpenAI, text
from _support.hubkit import ADMIN_KEY, Api, Live, serve_ranch
from _support.sdk import sdk_client


def config(base_url: str) -> str:
    return f"""
agents:
  - {{id: writer, kind: llm, model: writer, base_url: "{base_url}", api_key: sk-test}}
teams:
  - {{id: desk, members: [writer], default_agent: writer}}
"""


ANSWER = "Here is a long answer, written word by word, for the whole team."


def test_a_team_stream_grows_each_hops_text_in_place(fake: FakeOpenAI, base_url: str, tmp_path: Path) -> None:
    fake.script("writer", text(ANSWER))
    with serve_ranch(config(base_url), tmp_path / "s.db") as hub:

        async def scenario() -> list[tuple[str, str, bool, bool]]:
            message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text="write")])
            updates = []
            async with sdk_client(hub.agent_url("desk"), streaming=True) as client:
                async for response in client.send_message(SendMessageRequest(message=message)):
                    if response.HasField("artifact_update"):
                        update = response.artifact_update
                        said = "".join(part.text for part in update.artifact.parts)
                        updates.append((update.artifact.artifact_id, said, update.append, update.last_chunk))
            return updates

        updates = anyio.run(scenario)
    chunks = [u for u in updates if not u[3]]
    assert len(chunks) >= 3 and all(u[0] == "hop-1-writer" for u in updates)
    assert [u[2] for u in chunks] == [False] + [True] * (
        len(chunks) - 1
    )  # the first creates, the rest append
    assert "".join(u[1] for u in chunks) == ANSWER
    assert updates[-1] == ("hop-1-writer", ANSWER, False, True)  # then the hop's reply, whole


def test_in_a_room_a_members_text_grows_under_its_own_execution(
    fake: FakeOpenAI, base_url: str, tmp_path: Path
) -> None:
    fake.script("writer", text(ANSWER))
    with serve_ranch(config(base_url), tmp_path / "r.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = admin.post("/rooms", {"title": "Stream", "participants": [{"kind": "team", "id": "desk"}]})[
            "id"
        ]
        live = Live(hub.url, ADMIN_KEY)
        live.subscribe([room])
        admin.post(f"/rooms/{room}/messages", {"text": "@desk write"})
        frames = live.until(
            lambda f: f["type"] == "message.created" and f["data"]["sender"]["id"] == "writer", timeout=20
        )
        live.close()
        deltas = [f["data"] for f in frames if f["type"] == "message.delta"]
        reply = frames[-1]["data"]
        assert len(deltas) >= 3 and {d["agent"] for d in deltas} == {"writer"}
        assert {d["execution_id"] for d in deltas} == {reply["execution_id"]}  # the page replaces them
        assert "".join(d["text"] for d in deltas) == ANSWER == reply["text"]


GROUPED = """
agents:
  - {id: grouped, kind: python, entry: "_support.probes:GroupedProbe"}
  - {id: closer, kind: rules, rules: [{reply: "closed", route: user, reason: "done"}]}
teams:
  - {id: crew, members: [grouped, closer], default_agent: grouped, routes: {grouped: closer}}
"""


def test_a_member_holding_a_task_group_across_its_yields_streams_through_a_team(tmp_path: Path) -> None:
    with serve_ranch(GROUPED, tmp_path / "g.db") as hub:

        async def scenario() -> list[tuple[str, str]]:
            message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text="go")])
            seen = []
            async with sdk_client(hub.agent_url("crew"), streaming=True) as client:
                async for response in client.send_message(SendMessageRequest(message=message)):
                    if response.HasField("artifact_update"):
                        update = response.artifact_update
                        seen.append(
                            (update.artifact.artifact_id, "".join(p.text for p in update.artifact.parts))
                        )
                    elif response.HasField("status_update") and response.status_update.status.state == 3:
                        seen.append(
                            ("final", "".join(p.text for p in response.status_update.status.message.parts))
                        )
            return seen

        seen = anyio.run(scenario)
    assert [text for artifact, text in seen if artifact == "hop-1-grouped"] == [
        "held ", "open ", "throughout", "held open throughout",
    ]  # fmt: skip
    assert ("hop-2-closer", "closed") in seen and seen[-1] == ("final", "closed")
