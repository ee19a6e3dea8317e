"""Malformed input answers 4xx, or an error frame, in each entry's own format; never a 5xx or a drop.

Each entry is served for real on 127.0.0.1; the REST, WebSocket and task-store cases run on
SQLite and on PostgreSQL (`database_url`), where numbers past 64 bits failed differently.
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from _support.fuzzkit import nested
from _support.hubkit import ADMIN_KEY, Api, Live, serve_ranch
from _support.servers import ServerProcess, ranch_serve_process
from ranch.api import ws
from ranch.policy.limits import MAX_INT

CONFIG = "agents:\n  - {id: echo, kind: echo}\n"
V1 = {"A2A-Version": "1.0"}
DEEP_BODY = f'{{"text":"x","metadata":{nested(3000)}}}'.encode()
NOT_UTF8 = b"\xff\xfe{}"
FAR_FUTURE = "9999-12-31T23:59:59Z"


def refused(response: httpx.Response, field: str) -> dict[str, Any]:
    """The REST error of a 400 naming `field`."""
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == "INVALID_PARAMS" and error["field"] == field, error
    return error


def test_rest_refuses_deep_bodies_and_numbers_past_64_bits(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        admin.post("/rooms", {"id": "r1", "title": "R"})
        for path in ("/rooms/r1/messages", "/rooms", "/agents"):
            error = refused(admin.raw("POST", path, DEEP_BODY), "body")
            assert "deeper than" in error["message"] or "depth" in error["message"], error
        refused(admin.raw("POST", "/rooms/r1/messages", NOT_UTF8), "body")
        for value in (2**31, 2**63, 2**70):
            body = {"id": "big", "kind": "echo", "history_length": value}
            refused(admin.call("POST", "/agents", body), "history_length")
        for path in ("/rooms/r1/messages", "/rooms/r1/events"):
            error = refused(admin.call("GET", path, since=2**63), "since")
            assert str(MAX_INT) in error["message"]
            assert admin.call("GET", path, since=MAX_INT).status_code == 200  # the bound itself is fine


def test_websocket_bad_values_get_error_frames_naming_the_field(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        Api(hub.url, ADMIN_KEY).post("/rooms", {"id": "r1", "title": "R"})
        live = Live(hub.url, ADMIN_KEY)
        live.send({"type": "subscribe", "rooms": ["r1"], "cursor": 2**63})
        frame = live.recv()
        assert frame["type"] == "error" and frame["error"]["field"] == "cursor", frame
        live.send_raw("[" * 50_000 + "]" * 50_000)
        frame = live.recv()
        assert frame["type"] == "error" and frame["error"]["field"] == "frame", frame
        assert live.subscribe(["r1"], cursor=MAX_INT)["cursor"] == MAX_INT  # the socket is still up
        live.close()


def test_a_binary_frame_gets_an_error_frame_then_close_1003(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        live = Live(hub.url, ADMIN_KEY)
        live.connection.send(b"\x00\x01binary")
        frame = live.recv()
        assert frame["type"] == "error" and frame["error"]["field"] == "frame", frame
        assert "binary" in frame["error"]["message"]
        with pytest.raises(ConnectionClosed) as closed:
            live.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1003


def test_an_unexpected_failure_gets_an_error_frame_then_close_1011(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*args: Any) -> None:
        raise RuntimeError("the database went away")

    with serve_ranch(CONFIG, database_url) as hub:
        live = Live(hub.url, ADMIN_KEY)
        monkeypatch.setattr(ws, "visible_room", broken)  # a fault in the server, as a real one would be
        live.send({"type": "subscribe", "rooms": ["r1"]})
        frame = live.recv()
        assert frame["type"] == "error" and frame["error"]["code"] == "INTERNAL_ERROR", frame
        assert "went away" not in frame["error"]["message"]  # details stay in the server log
        with pytest.raises(ConnectionClosed) as closed:
            live.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
        assert httpx.get(f"{hub.url}/healthz", timeout=10).status_code == 200


def test_list_tasks_refuses_times_past_64_bit_nanoseconds(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        agent = f"{hub.url}/a2a/agents/echo"
        rest = httpx.get(
            f"{agent}/tasks", params={"statusTimestampAfter": FAR_FUTURE}, headers=V1, timeout=30
        )
        assert rest.status_code == 400, rest.text
        assert rest.json()["error"]["status"] == "INVALID_ARGUMENT"
        assert "statusTimestampAfter" in rest.json()["error"]["message"]
        body = {"jsonrpc": "2.0", "id": 7, "method": "ListTasks"}
        for after in (FAR_FUTURE, "0001-01-01T00:00:00Z"):
            rpc = httpx.post(agent, json={**body, "params": {"statusTimestampAfter": after}}, headers=V1)
            assert rpc.json()["error"]["code"] == -32602 and rpc.json()["id"] == 7, rpc.text
        fine = {"statusTimestampAfter": "2262-01-01T00:00:00Z"}
        assert "result" in httpx.post(agent, json={**body, "params": fine}, headers=V1).json()


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        ("message:send", V1),
        ("message:stream", V1),
        ("v1/message:send", {}),
        ("v1/message:stream", {}),
    ],
)
@pytest.mark.parametrize("body", [NOT_UTF8, f'{{"message":{nested(1000)}}}'.encode()], ids=["utf8", "deep"])
def test_http_json_bodies_it_cannot_parse_answer_400(
    path: str, headers: dict[str, str], body: bytes, tmp_path: Any
) -> None:
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'h.db'}") as hub:
        answer = httpx.post(
            f"{hub.url}/a2a/agents/echo/{path}",
            content=body,
            headers={**headers, "Content-Type": "application/json"},
            timeout=30,
        )
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT", error
    assert "not valid JSON" in error["message"]


def test_jsonrpc_and_03_query_bodies_it_cannot_parse_answer_in_their_format(tmp_path: Any) -> None:
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'h.db'}") as hub:
        agent = f"{hub.url}/a2a/agents/echo"
        deep = f'{{"jsonrpc":"2.0","id":1,"method":"message/send","params":{nested(1000)}}}'
        for body in (NOT_UTF8, deep.encode()):  # A2A 0.3 JSON-RPC: the SDK's dispatcher
            rpc = httpx.post(agent, content=body, headers={"Content-Type": "application/json"}, timeout=30)
            assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32700, rpc.text
        history = httpx.get(f"{agent}/v1/tasks/t-1", params={"historyLength": "abc"}, timeout=30)
        assert history.status_code == 400, history.text
        assert "historyLength" in history.json()["error"]["message"]


@pytest.mark.parametrize(
    ("path", "headers", "fits"),
    [("v1/tasks/t-1", {}, 404), ("tasks/t-1", V1, 404), ("tasks", V1, 200)],
    ids=["0.3-get", "1.0-get", "1.0-list"],
)
def test_query_integers_past_their_field_answer_400_naming_the_parameter(
    path: str, headers: dict[str, str], fits: int, tmp_path: Any
) -> None:
    """HTTP+JSON, 1.0 and 0.3: `historyLength` and `pageSize` go to int32 fields (0 to 2^31-1)."""
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'h.db'}") as hub:
        url = f"{hub.url}/a2a/agents/echo/{path}"
        for name in ("historyLength", "pageSize"):
            for value in ("2147483648", str(10**20), "-1", "+5", "1_0", ""):
                answer = httpx.get(url, params={name: value}, headers=headers, timeout=30)
                assert answer.status_code == 400, (name, value, answer.text)
                error = answer.json()["error"]
                assert error["status"] == "INVALID_ARGUMENT", error
                assert error["message"].startswith(f"{name} must be a whole number from 0 to 2147483647")
        largest = httpx.get(url, params={"historyLength": "2147483647"}, headers=headers, timeout=30)
        assert largest.status_code == fits, largest.text


def test_mcp_bodies_it_cannot_parse_answer_a_parse_error_400(tmp_path: Any) -> None:
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    deep = f'{{"jsonrpc":"2.0","id":1,"method":"ping","params":{nested(1000)}}}'.encode()
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'h.db'}") as hub:
        for body in (NOT_UTF8, deep):
            answer = httpx.post(f"{hub.url}/mcp", content=body, headers=headers, timeout=30)
            assert answer.status_code == 400, answer.text
            assert answer.json()["error"]["code"] == -32700, answer.text
        ping = httpx.post(
            f"{hub.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=headers, timeout=30
        )
    assert ping.status_code == 200 and '"result"' in ping.text, ping.text  # what parses still goes through


EMPTY_PART_10 = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}, {"text": ""}]}
EMPTY_PART_03 = {
    "kind": "message",
    "role": "user",
    "messageId": "m1",
    "parts": [{"kind": "text", "text": ""}],
}


@pytest.mark.parametrize(
    ("path", "headers", "body", "field"),
    [
        (
            "",
            V1,
            {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": EMPTY_PART_10}},
            1,
        ),
        (
            "",
            {},
            {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": EMPTY_PART_03}},
            0,
        ),
        ("/message:send", V1, {"message": EMPTY_PART_10}, 1),
        ("/message:stream", V1, {"message": EMPTY_PART_10}, 1),
        (
            "/v1/message:send",
            {},
            {"message": {"messageId": "m1", "role": "ROLE_USER", "content": [{"text": ""}]}},
            0,
        ),
    ],
    ids=["jsonrpc-1.0", "jsonrpc-0.3", "http+json-1.0", "http+json-1.0-stream", "http+json-0.3"],
)
def test_an_empty_text_part_is_refused_on_every_a2a_entry(
    path: str, headers: dict[str, str], body: dict[str, Any], field: int, tmp_path: Any
) -> None:
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'h.db'}") as hub:
        answer = httpx.post(f"{hub.url}/a2a/agents/echo{path}", json=body, headers=headers, timeout=30)
    expected = f"message.parts[{field}].text is empty"
    if not path:  # JSON-RPC: HTTP 200 with -32602
        assert answer.status_code == 200 and answer.json()["error"]["code"] == -32602, answer.text
        assert answer.json()["error"]["message"] == expected
    else:
        assert answer.status_code == 400, answer.text
        assert answer.json()["error"]["message"] == expected


NOT_JSON_TEXT = {
    "nul": b"\x00" * 5,  # json.loads of bytes reads NULs as UTF-32, then fails inside its codec
    "utf16": '{"jsonrpc":"2.0","id":1,"method":"message/send"}'.encode("utf-16-be"),  # no BOM: NULs
    "utf16-bom": '{"jsonrpc":"2.0","id":1}'.encode("utf-16"),
    "utf8-bom": b'\xef\xbb\xbf{"jsonrpc":"2.0","id":1,"method":"message/send"}',
    "invalid-utf8": NOT_UTF8,
    "binary": bytes(range(256)),
}


def ranch_process(tmp_path: Any) -> ServerProcess:
    """`ranch serve` as a child process, its log kept (`output()`)."""
    return ranch_serve_process(tmp_path, CONFIG, "--caller-rate", "off", admin_key=ADMIN_KEY)


def test_bodies_that_are_not_json_text_answer_each_bindings_parse_error(tmp_path: Any) -> None:
    """NUL bytes, UTF-16 (with or without its BOM), a UTF-8 BOM, invalid UTF-8, binary: every binding
    answers its parse error, and the 0.3 dispatcher's log holds no ERROR line or traceback for them
    nor for a 0.3 call that is not a valid JSON-RPC call."""
    mcp = {"Accept": "application/json, text/event-stream"}
    with ranch_process(tmp_path) as hub:
        agent = f"{hub.url}/a2a/agents/echo"
        Api(hub.url, ADMIN_KEY).post("/rooms", {"id": "r1", "title": "R"})
        for name, body in NOT_JSON_TEXT.items():
            for url, headers in ((agent, V1), (agent, {})):  # JSON-RPC 1.0, then 0.3
                rpc = httpx.post(url, content=body, headers={**headers, "Content-Type": "application/json"})
                assert rpc.status_code == 200 and rpc.json()["error"]["code"] == -32700, (name, rpc.text)
            for path, headers in (("message:send", V1), ("v1/message:send", {})):  # HTTP+JSON 1.0, 0.3
                answer = httpx.post(f"{agent}/{path}", content=body, headers=headers)
                assert answer.status_code == 400, (name, path, answer.text)
                assert answer.json()["error"]["status"] == "INVALID_ARGUMENT", (name, answer.text)
            answer = httpx.post(
                f"{hub.url}/mcp", content=body, headers={**mcp, "Content-Type": "application/json"}
            )
            assert answer.status_code == 400 and answer.json()["error"]["code"] == -32700, (name, answer.text)
            rest = Api(hub.url, ADMIN_KEY).raw("POST", "/rooms/r1/messages", body)
            refused(rest, "body")
        mistakes = [
            {"jsonrpc": "2.0", "id": 3},
            {"jsonrpc": "2.0", "id": 4, "method": "message/send", "params": {"message": {"parts": 5}}},
        ]
        for mistake in mistakes:
            answer = httpx.post(agent, json=mistake, timeout=30)
            assert answer.json()["error"]["code"] == -32600, answer.text
        log = hub.output()
    assert '"level": "error"' not in log and "Traceback" not in log, log[-3000:]
    assert "the caller's mistake" in log  # told as a warning, with why


def lists(depth: int) -> Any:
    """`depth` empty lists, one inside the other."""
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def a2a_entries(agent: str, metadata: dict[str, Any]) -> dict[str, httpx.Response]:
    """A message whose first part's metadata is `metadata`, sent on each A2A entry."""
    part10 = {"text": "x", "metadata": metadata}
    message10 = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [part10]}
    message03: dict[str, Any] = {"kind": "message", "role": "user", "messageId": uuid.uuid4().hex}
    message03["parts"] = [{"kind": "text", "text": "x", "metadata": metadata}]
    content = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "content": [part10]}
    rpc = {"jsonrpc": "2.0", "id": 5}
    return {
        "jsonrpc-1.0": httpx.post(
            agent, json={**rpc, "method": "SendMessage", "params": {"message": message10}}, headers=V1
        ),
        "jsonrpc-0.3": httpx.post(
            agent, json={**rpc, "method": "message/send", "params": {"message": message03}}
        ),
        "http+json-1.0": httpx.post(f"{agent}/message:send", json={"message": message10}, headers=V1),
        "http+json-0.3": httpx.post(f"{agent}/v1/message:send", json={"message": content}, timeout=30),
    }


def test_deep_part_metadata_is_refused_naming_the_field_on_every_entry(tmp_path: Any) -> None:
    """32 levels of objects and lists (the outermost and an empty innermost one included) pass
    everywhere, 33 are refused everywhere, and 40 on A2A 0.3 (past protobuf's decoding depth) too."""
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'h.db'}") as hub:
        agent = f"{hub.url}/a2a/agents/echo"
        admin = Api(hub.url, ADMIN_KEY)
        admin.post("/rooms", {"id": "r1", "title": "R"})
        deepest = json.loads(nested(39, "{}"))
        for levels, metadata in ((32, {"a": lists(31)}), (33, {"a": lists(32)}), (40, deepest)):
            answers = a2a_entries(agent, metadata)
            answers["rest"] = admin.call(
                "POST", "/rooms/r1/messages", {"parts": [{"text": "x", "metadata": metadata}]}
            )
            for entry, answer in answers.items():
                if levels == 32:
                    assert answer.status_code < 300 and "error" not in answer.json(), (entry, answer.text)
                    continue
                assert answer.status_code == (200 if entry.startswith("jsonrpc") else 400), (
                    entry,
                    answer.text,
                )
                error = answer.json()["error"]
                message = error["message"]
                assert "nests deeper than 32 levels" in message, (entry, levels, error)
                field = (
                    "message.content[0].metadata" if entry == "http+json-0.3" else "message.parts[0].metadata"
                )
                assert message.startswith("parts[0].metadata" if entry == "rest" else field), (entry, error)
                if entry.startswith("jsonrpc"):
                    assert error["code"] == -32602, (entry, error)


def test_a2a03_http_json_file_bytes_reach_the_agent_as_sent(tmp_path: Any) -> None:
    """The SDK's 0.3 HTTP+JSON adapter decodes (and encodes) a file's base64 twice; ranch mends both
    ways: echo answers the very bytes sent, on send and on stream. Text that is not base64: 400."""
    sent = bytes(range(256))  # not UTF-8, NULs included
    encoded = base64.b64encode(sent).decode()
    file = {"fileWithBytes": encoded, "mimeType": "application/octet-stream", "name": "blob.bin"}
    content = [{"text": "here"}, {"file": file}]
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'h.db'}") as hub:
        agent = f"{hub.url}/a2a/agents/echo"
        message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "content": content}
        answer = httpx.post(f"{agent}/v1/message:send", json={"message": message}, timeout=30)
        assert answer.status_code == 200, answer.text
        assert answer.json()["message"]["content"][1]["file"] == file, answer.text
        message["messageId"] = uuid.uuid4().hex
        stream = httpx.post(f"{agent}/v1/message:stream", json={"message": message}, timeout=30)
        assert stream.status_code == 200, stream.text
        events = [json.loads(line[5:]) for line in stream.text.splitlines() if line.startswith("data:")]
        assert [e["message"]["content"][1]["file"] for e in events] == [file], stream.text
        message["content"] = [{"file": {**file, "fileWithBytes": "not base64!"}}]
        bad = httpx.post(f"{agent}/v1/message:send", json={"message": message}, timeout=30)
    assert bad.status_code == 400, bad.text
    assert bad.json()["error"]["message"] == "message.content[0].file.fileWithBytes is not base64", bad.text
