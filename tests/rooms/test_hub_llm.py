"""An llm agent in a room: its tool calls and results become room messages, its text streams
as `message.delta` events, and `call_remote_agent` reaches only what the organization allows."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from _support import mcp_tools
from _support.fake_openai import FakeOpenAI, text, tool
from _support.hubkit import ADMIN_KEY, Api, Live, serve_ranch, wait_until
from _support.peers import running_peer
from _support.servers import ServerThread, free_port

CONFIG = """
agents:
  - id: greeter
    kind: rules
    rules: [{reply: "hello"}]
"""


@pytest.fixture(scope="module")
def http_tools() -> Iterator[str]:
    with ServerThread(mcp_tools.http_app(), name="mcp-http") as server:
        yield f"{server.url}/mcp"


def test_an_llm_agent_uses_tools_and_remote_agents_in_a_room(
    database_url: str, provider: tuple[FakeOpenAI, str], http_tools: str
) -> None:
    fake, base_url = provider
    fake.reset()
    with (
        running_peer("plain") as allowed,
        running_peer("plain") as elsewhere,
        serve_ranch(CONFIG, database_url) as hub,
    ):
        admin = Api(hub.url, ADMIN_KEY)
        admin.call("PATCH", "/organizations/current", {"allowed_agent_urls": [allowed.url]})
        refused = admin.call(
            "POST", "/agents", {"id": "leaky", "kind": "llm", "model": "m", "api_key": "sk-x"}
        )
        assert refused.status_code == 400 and refused.json()["error"]["field"] == "api_key"
        admin.post(
            "/agents",
            {
                "id": "analyst",
                "kind": "llm",
                "model": "analyst",
                "base_url": base_url,
                "mcp_servers": [{"name": "calc", "url": http_tools}],
                "remote_agents": [
                    {"name": "helper", "url": allowed.url},
                    {"name": "outsider", "url": elsewhere.url},
                ],
            },
        )
        room = admin.post(
            "/rooms", {"title": "Numbers", "participants": [{"kind": "agent", "id": "analyst"}]}
        )["id"]
        fake.script(
            "analyst",
            tool("add", {"a": 2, "b": 3}),
            tool("call_remote_agent", {"agent": "outsider", "message": "psst"}),
            tool("call_remote_agent", {"agent": "helper", "message": "check 5"}),
            text("2 + 3 = 5, and the helper agrees."),
        )
        live = Live(hub.url, ADMIN_KEY)
        live.subscribe([room])
        admin.post(f"/rooms/{room}/messages", {"text": "@analyst what is 2 + 3?"})
        frames = live.until(
            lambda f: (
                f["type"] == "message.created"
                and f["data"]["sender"]["id"] == "analyst"
                and f["data"]["type"] == "text"
            )
        )
        live.close()

        posted = [
            (m["type"], m["metadata"].get("data", {}))
            for m in admin.messages(room)
            if m["sender"]["id"] == "analyst"
        ]
        kinds = [kind for kind, _ in posted]
        assert kinds == [
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_result",
            "tool_call",
            "tool_result",
            "text",
        ]
        assert posted[0][1]["name"] == "add" and posted[0][1]["arguments"] == {"a": 2, "b": 3}
        assert "5" in str(posted[1][1]["result"])
        assert posted[3][1]["is_error"] and "allow-list" in str(
            posted[3][1]["result"]
        )  # the organization's list
        assert "plain saw: check 5" in str(posted[5][1]["result"])
        assert elsewhere.recorder.posts() == []  # refused before any request left
        assert admin.messages(room)[-1]["text"] == "2 + 3 = 5, and the helper agrees."
        streamed = ""
        pieces = [f["data"] for f in frames if f["type"] == "message.delta"]
        for piece in pieces:  # append, or replace what came before (docs/api.md)
            streamed = streamed + piece["text"] if piece["append"] else piece["text"]
        assert len(pieces) > 2 and streamed == "2 + 3 = 5, and the helper agrees."
        execution = wait_until(
            lambda: (
                admin.executions(room)["analyst"]["status"] == "ready" and admin.executions(room)["analyst"]
            )
        )
        assert [call["name"] for call in execution["tool_calls"]] == [
            "add",
            "call_remote_agent",
            "call_remote_agent",
        ]
        # the execution's task history keeps each tool call as the structured call: a data part
        got = httpx.post(
            hub.agent_url("analyst"),
            json={"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": execution["id"]}},
            headers={"A2A-Version": "1.0"},
            timeout=10,
        ).json()
        data = [part["data"] for m in got["result"]["history"] for part in m["parts"] if "data" in part]
        assert data[0]["name"] == "add" and data[0]["arguments"] == {"a": 2, "b": 3}
        assert "5" in str(data[1]["result"])


PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def test_a_vision_model_sees_the_image_posted_and_a_text_model_refuses_it(
    database_url: str, provider: tuple[FakeOpenAI, str]
) -> None:
    fake, base_url = provider
    fake.reset()

    async def picture(request: Request) -> Response:
        return Response(base64.b64decode(PIXEL), media_type="image/png")

    images = Starlette(routes=[Route("/dot.png", picture)])
    with serve_ranch(CONFIG, database_url) as hub, ServerThread(images, name="images") as server:
        pictures = server.url
        admin = Api(hub.url, ADMIN_KEY)
        common = {"kind": "llm", "base_url": base_url}
        seer = {"id": "seer", "model": "seer", "input_modes": ["text/plain", "image/*"], **common}
        admin.post("/agents", {**seer, "fetch_private_urls": True})  # the pictures are on 127.0.0.1
        admin.post("/agents", {"id": "reader", "model": "reader", **common})
        participants = [{"kind": "agent", "id": "seer"}, {"kind": "agent", "id": "reader"}]
        room = admin.post("/rooms", {"title": "Pictures", "participants": participants})["id"]
        fake.script("seer", text("A single pixel."))
        image = {"raw": PIXEL, "filename": "dot.png", "mediaType": "image/png"}
        linked = {"url": f"{pictures}/dot.png", "mediaType": "image/png"}
        gone = {"url": f"http://127.0.0.1:{free_port()}/gone.png", "mediaType": "image/png"}
        parts = [image, linked, gone]
        admin.post(f"/rooms/{room}/messages", {"text": "@seer what is this?", "parts": parts})
        wait_until(
            lambda: any(m["text"] == "A single pixel." for m in admin.messages(room)), what="seer's answer"
        )
        (asked,) = fake.requests_for("seer")
        content = asked["messages"][-1]["content"]
        said = content[0]["text"]  # the files named, and the image it could not read said so
        assert said.startswith("what is this?\n\n[file: dot.png]") and "could not be read" in said
        seen = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}}
        assert content[1:] == [seen, seen]  # the linked one read by the agent, sent as bytes

        refused = admin.call(
            "POST", f"/rooms/{room}/messages", {"text": "@reader and you?", "parts": [image]}
        )
        assert refused.status_code == 415 and refused.json()["error"]["field"] == "parts[0]"
        assert fake.requests_for("reader") == []
