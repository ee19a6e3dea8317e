"""One error table: each error has one JSON-RPC code and one HTTP status, the same on every binding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.utils.errors import TaskNotFoundError

from _support.hubkit import serve_ranch
from ranch import exceptions as ranch
from ranch.wire import errors

ECHO = "agents:\n  - {id: echo, kind: echo}\n"


@pytest.mark.parametrize(
    ("error", "code", "status", "reason"),
    [
        (TaskNotFoundError("task t not found"), -32001, 404, "TASK_NOT_FOUND"),
        (ranch.AgentNotFound("x", ["a"]), -32050, 404, "AGENT_NOT_FOUND"),
        (ranch.InvalidRecipient("a", "b", "t"), -32051, 422, "INVALID_RECIPIENT"),
        (ranch.HopLimitExceeded("t", 3, ["a"]), -32052, 422, "HOP_LIMIT_EXCEEDED"),
        (ranch.AgentUnavailable("a", "down"), -32053, 503, "AGENT_UNAVAILABLE"),
        (ranch.AgentTimeout("a", 2), -32054, 504, "AGENT_TIMEOUT"),
        (ranch.ExtensionSupportRequired("a", ["urn:x"]), -32008, 400, "EXTENSION_SUPPORT_REQUIRED"),
        (ranch.PayloadTooLarge(200_000, 100_000), -32602, 413, "PAYLOAD_TOO_LARGE"),
        (ranch.UnsafeUrl("http://10.0.0.1/", "private address"), -32602, 400, "UNSAFE_URL"),
        (ranch.RateLimited("caller:ip:1", 0.2), -32060, 429, "RATE_LIMITED"),
        (ranch.Unauthorized("no key"), -32061, 401, "UNAUTHENTICATED"),
        (ranch.SessionExpired("session s expired"), -32063, 401, "SESSION_EXPIRED"),
        (RuntimeError("boom"), -32603, 500, "INTERNAL_ERROR"),
    ],
)
def test_one_row_per_error(error: Exception, code: int, status: int, reason: str) -> None:
    assert errors.jsonrpc_code_for(error) == code
    assert errors.http_status_for(error) == status
    assert errors.rest_error_body(error)["error"]["code"] == reason
    wire = errors.to_a2a(error)  # as the SDK's bindings see it
    assert errors.jsonrpc_error_body(wire, 7)["error"]["code"] == code
    assert errors.a2a_rest_error_body(wire)["error"]["code"] == status


def test_rest_body_names_the_field_and_hides_internals_outside_debug() -> None:
    body = errors.rest_error_body(ranch.UnsafeUrl("http://127.0.0.1/", "loopback address"))
    assert body == {
        "error": {
            "code": "UNSAFE_URL",
            "message": "refusing to call http://127.0.0.1/: loopback address",
            "field": "url",
        }
    }
    limited = errors.rest_error_body(ranch.RateLimited("agent:echo", 0.3))["error"]
    assert limited["retryAfter"] == 1 and errors.headers_for(ranch.RateLimited("k", 2.5)) == {
        "Retry-After": "3"
    }
    try:
        raise RuntimeError("secret detail")
    except RuntimeError as exc:
        hidden, shown = errors.rest_error_body(exc), errors.rest_error_body(exc, debug=True)
    assert "secret" not in str(hidden) and "trace" not in hidden["error"]
    assert "secret detail" in shown["error"]["message"] and "Traceback" in shown["error"]["trace"]


def _send_body(text: str, method: str = "SendMessage") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 3,
        "method": method,
        "params": {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": text}]}},
    }


def test_message_limit_is_the_same_error_on_every_binding(tmp_path: Path) -> None:
    big = "x" * 120_000
    with serve_ranch(ECHO, tmp_path / "t.db") as ranch_, httpx.Client(timeout=10) as http:
        url = ranch_.agent_url("echo")
        lean = http.post(url, json=_send_body(big), headers={"A2A-Version": "1.0"}).json()
        assert lean["id"] == 3 and lean["error"]["code"] == -32602, lean
        assert "100000" in lean["error"]["message"]
        v03 = {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "message/send",
            "params": {
                "message": {
                    "role": "user",
                    "messageId": "m2",
                    "kind": "message",
                    "parts": [{"kind": "text", "text": big}],
                }
            },
        }
        legacy = http.post(url, json=v03).json()
        assert legacy["error"]["code"] == -32602 and "100000" in legacy["error"]["message"], legacy
        rest = http.post(
            f"{url}/message:send",
            json={"message": {"role": "ROLE_USER", "messageId": "m3", "parts": [{"text": big}]}},
            headers={"A2A-Version": "1.0"},
        )
        assert rest.status_code == 413, rest.text
        assert "100000" in rest.json()["error"]["message"]
        assert rest.json()["error"]["details"][0]["reason"] == "PAYLOAD_TOO_LARGE"
        small = http.post(url, json=_send_body("fine"), headers={"A2A-Version": "1.0"}).json()
        assert "result" in small, small


def test_control_characters_are_refused_naming_the_part(tmp_path: Path) -> None:
    with serve_ranch(ECHO, tmp_path / "t.db") as ranch_, httpx.Client(timeout=10) as http:
        answer = http.post(
            ranch_.agent_url("echo"), json=_send_body("bell\x07"), headers={"A2A-Version": "1.0"}
        ).json()
    assert answer["error"]["code"] == -32602, answer
    assert "message.parts[0].text" in answer["error"]["message"] and "U+0007" in answer["error"]["message"]
