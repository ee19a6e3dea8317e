"""Rooms carry every A2A part: text, files (inline bytes or a URL) and structured data.

A message keeps the parts it was posted with, over REST, the WebSocket and A2A into the room;
agents receive them as A2A parts (echo answers with what it got, a probe records it), the
execution's task history gives them back, and an agent that does not take a part's media type
is never handed it: a caller's post is refused with the A2A error for unsupported content.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import anyio
import httpx
import pytest
from a2a.types import GetTaskRequest, Message, Part, Role
from google.protobuf.json_format import MessageToDict

from _support import probes
from _support.hubkit import ADMIN_KEY, Api, Live, serve_ranch, wait_until
from _support.sdk import sdk_client, send
from ranch.rooms import parts as room_parts

CONFIG = """
agents:
  - id: echo
    kind: echo
  - id: greeter
    kind: rules
    rules: [{reply: "Hello: {text}"}]
  - id: viewer
    kind: python
    entry: _support.probes:Probe
    input_modes: ["text/plain", "image/*", "application/json"]
    options: {reply: "seen"}
"""
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PNG_PART = {"raw": base64.b64encode(PNG).decode(), "filename": "dot.png", "mediaType": "image/png"}
DATA_PART = {"data": {"order": 42, "items": ["tea", "cake"]}}


def a2a_send(url: str, parts: list[dict[str, Any]], context_id: str = "") -> dict[str, Any]:
    """A JSON-RPC SendMessage of `parts` as any HTTP client sends it; the decoded answer."""
    message: dict[str, Any] = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": parts}
    if context_id:
        message["contextId"] = context_id
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer: dict[str, Any] = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=10).json()
    return answer


def room_with(admin: Api, *agents: str) -> str:
    participants = [{"kind": "agent", "id": agent} for agent in agents]
    return str(admin.post("/rooms", {"title": "Files", "participants": participants})["id"])


def reply_of(admin: Api, room: str, agent: str) -> dict[str, Any]:
    reply: dict[str, Any] = wait_until(
        lambda: next((m for m in admin.messages(room) if m["sender"]["id"] == agent), None),
        what=f"{agent}'s reply",
    )
    return reply


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a_file_and_a_data_part_go_into_a_room_and_come_back_through_get_task(
    binding: str, database_url: str
) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "echo")
        message = Message(
            role=Role.ROLE_USER,
            message_id=f"m-{binding}",
            context_id=room,
            parts=[
                Part(text="look at this"),
                Part(raw=PNG, filename="dot.png", media_type="image/png"),
                Part(
                    url="https://files.example/report.pdf",
                    filename="report.pdf",
                    media_type="application/pdf",
                ),
                _data_part(),
            ],
        )

        async def scenario() -> None:
            async with sdk_client(hub.agent_url("echo"), binding=binding) as client:
                (answer,) = await send(client, message)
                fetched = await client.get_task(GetTaskRequest(id=answer.task.id))
                asked, answered = fetched.history[0], fetched.history[1]
                for got in (asked, answered):
                    by_kind = {part.WhichOneof("content"): part for part in got.parts}
                    assert by_kind["raw"].raw == PNG
                    assert (by_kind["raw"].filename, by_kind["raw"].media_type) == ("dot.png", "image/png")
                    assert by_kind["url"].url == "https://files.example/report.pdf"
                    assert MessageToDict(by_kind["data"].data) == DATA_PART["data"]
                assert asked.parts[0].text == "look at this"
                assert answered.role == Role.ROLE_AGENT

        anyio.run(scenario)
        posted, echoed = admin.messages(room)[:2]
        assert posted["text"] == "look at this"
        assert [sorted(part) for part in posted["parts"]] == [
            ["text"],
            ["filename", "mediaType", "raw"],
            ["filename", "mediaType", "url"],
            ["data"],
        ]
        assert posted["parts"][1] == PNG_PART
        assert echoed["sender"]["id"] == "echo" and echoed["parts"] == posted["parts"]


def _data_part() -> Part:
    part = Part()
    part.data.struct_value.update(DATA_PART["data"])
    return part


def test_rest_and_the_websocket_carry_parts_and_agents_receive_them_as_a2a_parts(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "viewer", "greeter")
        probes.RECEIVED.pop("viewer", None)
        live = Live(hub.url, ADMIN_KEY)
        live.subscribe([room])
        posted = admin.post(
            f"/rooms/{room}/messages", {"text": "@viewer what is this?", "parts": [PNG_PART, DATA_PART]}
        )
        assert posted["parts"] == [{"text": "@viewer what is this?"}, PNG_PART, DATA_PART]
        frames = live.until(lambda f: f["type"] == "message.created" and f["data"]["id"] == posted["id"])
        live.close()
        assert frames[-1]["data"]["parts"] == posted["parts"]
        assert reply_of(admin, room, "viewer")["text"] == "seen"
        (received,) = probes.RECEIVED["viewer"]
        own = [part for part in received.parts if not part.HasField("metadata")]
        assert own[0].text == "what is this?"  # addressed: without its @viewer
        assert (own[1].raw, own[1].media_type, own[1].filename) == (PNG, "image/png", "dot.png")
        assert MessageToDict(own[2].data) == DATA_PART["data"]

        # the next agent is shown the earlier message in its room history, its file named
        probes.RECEIVED.pop("viewer", None)
        admin.post(f"/rooms/{room}/messages", {"text": "@viewer and now?"})
        wait_until(lambda: probes.RECEIVED.get("viewer"), what="the second delivery")
        history = probes.RECEIVED["viewer"][0].parts[0].text
        assert "[file: dot.png (image/png, 70 bytes)]" in history and '"order": 42' in history


def test_a_part_an_agent_does_not_take_is_refused_and_nothing_is_stored(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "greeter")
        refused = admin.call("POST", f"/rooms/{room}/messages", {"text": "@greeter hi", "parts": [PNG_PART]})
        assert refused.status_code == 415, refused.text
        error = refused.json()["error"]
        assert error["code"] == "CONTENT_TYPE_NOT_SUPPORTED" and error["field"] == "parts[0]"
        assert "image/png" in error["message"] and "text/plain" in error["message"]
        assert admin.messages(room) == []

        # over A2A: the error A2A gives unsupported content (-32005), naming the part and the mode
        answer = a2a_send(hub.agent_url("greeter"), [{"text": "hi"}, {"data": {"a": 1}}])
        assert answer["error"]["code"] == -32005
        assert "message.parts[1] is application/json" in answer["error"]["message"]


BAD_POSTS = [
    ({"parts": [{"raw": base64.b64encode(b"x" * 120_000).decode()}]}, 413, "parts"),
    ({"text": "x" * 120_000}, 413, "text"),
    ({"parts": [{"text": "a", "data": {}}]}, 400, "parts[0]"),
    ({"parts": [{"raw": "not base64!"}]}, 400, "parts[0]"),
    ({"parts": [{"url": "file:///etc/passwd"}]}, 400, "parts[0].url"),
    ({"parts": [{"raw": "eA==", "mediaType": "png"}]}, 400, "parts[0].mediaType"),
    ({"parts": [{"data": {"": 1}}]}, 400, "parts[0].data"),
    ({"parts": [{"text": "ok"}, {"text": "bell\u0007"}]}, 400, "parts[1].text"),
    ({"parts": []}, 400, "parts"),
    ({}, 400, "text"),
]


def test_a_bad_part_is_refused_naming_it(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "echo")
        for body, status, field in BAD_POSTS:
            refused = admin.call("POST", f"/rooms/{room}/messages", body)
            assert refused.status_code == status, (body, refused.text)
            assert refused.json()["error"]["field"] == field, (body, refused.text)
        assert admin.messages(room) == []


def test_a_file_link_is_http_or_https_wherever_it_comes_from(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "echo")
        link = {"url": "javascript:alert(document.cookie)", "filename": "x"}
        answer = a2a_send(hub.agent_url("echo"), [link], context_id=room)
        assert answer["error"]["code"] == -32602
        assert answer["error"]["data"][0]["metadata"]["field"] == "message.parts[0].url"
        assert admin.messages(room) == []

    # what an agent answers is stored without such a link: a note stands in its place
    kept = room_parts.stored([Part(text="see"), Part(url="javascript:alert(1)", filename="x.html")])
    assert kept == [
        {"text": "see"},
        {"text": "[ranch] a file link that is not http(s) was left out (x.html)"},
    ]
