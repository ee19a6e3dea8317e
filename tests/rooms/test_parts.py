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


def link_to(room: str, message_id: str, index: int, part: dict[str, Any]) -> dict[str, Any]:
    """A file part posted with bytes as every view shows it: a relative link to them, and their size."""
    url = f"/api/v1/rooms/{room}/messages/{message_id}/parts/{index}"
    shown = {key: value for key, value in part.items() if key != "raw"}
    return {"url": url, **shown, "size": len(base64.b64decode(part["raw"]))}


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
        assert [sorted(part) for part in posted["parts"]] == [  # its text is `text`, not repeated
            ["filename", "mediaType", "size", "url"],
            ["filename", "mediaType", "url"],
            ["data"],
        ]
        assert posted["parts"][0] == link_to(room, posted["id"], 1, PNG_PART)  # part 0 is its text
        assert echoed["sender"]["id"] == "echo"
        assert echoed["parts"] == [link_to(room, echoed["id"], 1, PNG_PART), *posted["parts"][1:]]


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
        assert posted["text"] == "@viewer what is this?"
        assert posted["parts"] == [link_to(room, posted["id"], 1, PNG_PART), DATA_PART]
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


def deep(levels: int, kind: str) -> Any:
    """JSON nesting `levels` objects or lists."""
    value: Any = 1
    for _ in range(levels):
        value = {"a": value} if kind == "object" else [value]
    return value


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
    ({"parts": [{"data": deep(95, "list")}]}, 400, "parts[0].data"),  # protobuf could not even take it
    ({"parts": [{"data": deep(33, "list")}]}, 400, "parts[0].data"),
    ({"parts": [{"text": "x", "metadata": deep(40, "object")}]}, 400, "parts[0].metadata"),
    ({"parts": [{"url": "http://a.example/\nx"}]}, 400, "parts[0].url"),
    ({"parts": [{"url": "https://a.example/a b"}]}, 400, "parts[0].url"),
    ({"parts": [{"url": "https:///no-host"}]}, 400, "parts[0].url"),
    ({"parts": [{"raw": "eA==", "mediaType": "not a type\r\nX: y"}]}, 400, "parts[0].mediaType"),
    ({"parts": [{"text": f"p{i}"} for i in range(65)]}, 400, "parts"),
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


# -- a file's bytes are read from the hub on their own, never inlined in pages ---------------------

PAGE = b"<html><script>alert(document.cookie)</script></html>"
PAGE_PART = {
    "raw": base64.b64encode(PAGE).decode(),
    "filename": 'na\u00efve "plan"; x.html',
    "mediaType": "text/html",
}
LINKED = {"url": "https://files.example/report.pdf", "filename": "report.pdf", "mediaType": "application/pdf"}


def test_views_link_a_files_bytes_and_the_part_route_answers_them_to_participants_only(
    database_url: str,
) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin)
        live = Live(hub.url, ADMIN_KEY)
        live.subscribe([room])
        posted = admin.post(
            f"/rooms/{room}/messages", {"text": "files", "parts": [PNG_PART, LINKED, PAGE_PART]}
        )
        png, html = link_to(room, posted["id"], 1, PNG_PART), link_to(room, posted["id"], 3, PAGE_PART)
        assert posted["parts"] == [png, LINKED, html]  # a posted URL stays as posted
        frames = live.until(lambda f: f["type"] == "message.created" and f["data"]["id"] == posted["id"])
        live.close()
        assert frames[-1]["data"]["parts"] == posted["parts"]
        page = admin.call("GET", f"/rooms/{room}/messages", since=0)
        assert page.json()["items"][0]["parts"] == posted["parts"]
        assert PNG_PART["raw"] not in page.text and PAGE_PART["raw"] not in page.text

        got = httpx.get(hub.url + png["url"], headers={"X-API-Key": ADMIN_KEY}, timeout=10)
        assert got.status_code == 200 and got.content == PNG
        assert got.headers["content-type"] == "image/png"
        answer = httpx.get(hub.url + html["url"], headers={"X-API-Key": ADMIN_KEY}, timeout=10)
        assert answer.status_code == 200 and answer.content == PAGE  # the bytes, as a download only:
        assert (
            answer.headers["content-disposition"]
            == "attachment; filename*=UTF-8''na%C3%AFve%20%22plan%22%3B%20x.html"
        )
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["content-security-policy"] == "sandbox"

        # only the room's participants: another organization, and a member not in the room, see nothing
        beta = admin.post("/organizations", {"id": "beta"})["owner"]["api_key"]
        bob = admin.post("/users", {"id": "bob", "name": "Bob"})["api_key"]
        for key in (beta, bob):
            refused = httpx.get(hub.url + png["url"], headers={"X-API-Key": key}, timeout=10)
            assert refused.status_code == 404 and refused.json()["error"]["field"] == "room_id", refused.text
        assert httpx.get(hub.url + png["url"], timeout=10).status_code == 401

        base = f"/rooms/{room}/messages"
        for path, field in [
            (f"{base}/nosuch/parts/1", "message_id"),
            (f"{base}/{posted['id']}/parts/0", "index"),  # its text: no bytes
            (f"{base}/{posted['id']}/parts/2", "index"),  # a URL: the hub never holds its bytes
            (f"{base}/{posted['id']}/parts/4", "index"),
            (f"{base}/{posted['id']}/parts/-1", "index"),
            (f"{base}/{posted['id']}/parts/x", "index"),
            (f"{base}/{posted['id']}/parts/99999999999999999999", "index"),
        ]:
            missing = admin.call("GET", path)
            assert missing.status_code == 404 and missing.json()["error"]["field"] == field, (
                path,
                missing.text,
            )


# -- one validator of parts on every A2A entry, as on REST -----------------------------------------

LF_URL = "http://a.example/\nx"
BAD_MEDIA_TYPE = "not a type\r\nX: y"


def _parts_10(case: str) -> list[dict[str, Any]]:
    """A2A 1.0 JSON parts: the audit's bad inputs, or one of each good kind."""
    cases: dict[str, list[dict[str, Any]]] = {
        "many": [{"text": f"p{i}"} for i in range(65)],
        "media_type": [{"text": "x", "mediaType": BAD_MEDIA_TYPE}],
        "url": [{"url": LF_URL}],
        "metadata": [{"text": "x", "metadata": deep(40, "object")}],
        "good": [{"text": "hi"}, PNG_PART, {"url": "https://a.example/r.pdf"}, DATA_PART],
    }
    return cases[case]


def _parts_03(case: str, http: bool) -> list[dict[str, Any]]:
    """The same in A2A 0.3: JSON-RPC's `kind`-tagged parts, or HTTP+JSON's protobuf JSON."""

    def file(uri: str = "https://a.example/r.pdf", mime: str = "application/pdf") -> dict[str, Any]:
        if http:
            return {"file": {"fileWithUri": uri, "mimeType": mime}}
        return {"kind": "file", "file": {"uri": uri, "mimeType": mime}}

    def text(value: str, **extra: Any) -> dict[str, Any]:
        return {"text": value, **extra} if http else {"kind": "text", "text": value, **extra}

    data = {"data": {"data": DATA_PART["data"]}} if http else {"kind": "data", "data": DATA_PART["data"]}
    # 0.3 HTTP+JSON file bytes are not in "good": the a2a-sdk's 0.3 REST adapter decodes them twice
    raw = [] if http else [{"kind": "file", "file": {"bytes": PNG_PART["raw"], "mimeType": "image/png"}}]
    return {
        "many": [text(f"p{i}") for i in range(65)],
        "media_type": [file(mime=BAD_MEDIA_TYPE)],
        "url": [file(uri=LF_URL)],
        "metadata": [text("x", metadata=deep(40, "object"))],
        "good": [text("hi"), file(), data, *raw],
    }[case]


def a2a_post(url: str, entry: str, case: str, context_id: str) -> tuple[dict[str, Any], str | None]:
    """Send `case`'s parts on `entry`: the answer, and the field its InvalidParams error names (or None)."""
    message_id = uuid.uuid4().hex
    if entry.endswith("1.0"):
        message = {
            "role": "ROLE_USER",
            "messageId": message_id,
            "parts": _parts_10(case),
            "contextId": context_id,
        }
        headers = {"A2A-Version": "1.0"}
    elif entry == "JSONRPC 0.3":
        message = {"kind": "message", "role": "user", "messageId": message_id, "contextId": context_id}
        message["parts"] = _parts_03(case, http=False)
        headers = {}
    else:
        message = {"role": "ROLE_USER", "messageId": message_id, "contextId": context_id}
        message["content"] = _parts_03(case, http=True)
        headers = {}
    if entry.startswith("JSONRPC"):
        method = "SendMessage" if entry.endswith("1.0") else "message/send"
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}
        answer: dict[str, Any] = httpx.post(url, json=body, headers=headers, timeout=30).json()
        error = answer.get("error")
        if error is None:
            return answer, None
        assert error["code"] == -32602, answer
        data = error["data"]
        return answer, data[0]["metadata"]["field"] if isinstance(data, list) else data["field"]
    path = "/message:send" if entry.endswith("1.0") else "/v1/message:send"
    response = httpx.post(url + path, json={"message": message}, headers=headers, timeout=30)
    if response.status_code == 200:
        return response.json(), None
    assert response.status_code == 400, response.text
    (detail,) = response.json()["error"]["details"]
    assert detail["reason"] == "INVALID_PARAMS", response.text
    return response.json(), detail["metadata"]["field"]


A2A_ENTRIES = ["JSONRPC 1.0", "HTTP+JSON 1.0", "JSONRPC 0.3", "HTTP+JSON 0.3"]
REFUSED = {
    "many": "message.parts",
    "media_type": "message.parts[0].mediaType",
    "url": "message.parts[0].url",
    "metadata": "message.parts[0].metadata",
}


@pytest.mark.parametrize("entry", A2A_ENTRIES)
def test_a2a_entries_refuse_the_parts_rest_refuses_naming_the_field(entry: str, tmp_path: Any) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "echo")
        for case, field in REFUSED.items():
            if case == "metadata" and entry.endswith("0.3"):
                continue  # the a2a-sdk's 0.3 conversion meets it first (upb's depth limit), before ranch
            for context_id in (room, f"ctx-{case}"):  # into the room, and to the agent alone
                answer, named = a2a_post(hub.agent_url("echo"), entry, case, context_id)
                assert named == field, (case, answer)
        assert admin.messages(room) == []

        answer, named = a2a_post(hub.agent_url("echo"), entry, "good", room)  # every good kind still passes
        assert named is None, answer
        posted = wait_until(lambda: admin.messages(room), what="the good message in the room")
        kinds = {next(key for key in ("text", "raw", "url", "data") if key in p) for p in posted[0]["parts"]}
        assert posted[0]["text"]  # its text parts are `text`; `parts` holds the others
        assert kinds == {"url", "data"}  # a file's bytes are a link to them on the hub
        held = [p for p in posted[0]["parts"] if "size" in p]
        assert [p["size"] for p in held] == ([] if entry == "HTTP+JSON 0.3" else [len(PNG)])
