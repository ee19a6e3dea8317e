"""A file part's URL scheme is case-insensitive (RFC 3986), the same wherever a URL is judged.

A caller's message is checked on every entry (`check_file_url`, A2A and REST alike); what an agent
answers into a room is stored with its links only when they are http(s) (`web_url`), and the page
links them the same way. `HTTPS://files.example/x.pdf` is one URL to all three: accepted, kept and
shown, never refused by one and kept by another.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.types import Message, Part, Role

from _support.hubkit import ADMIN_KEY, Api, serve_ranch
from ranch.exceptions import InvalidInput
from ranch.policy.limits import Limits, check_message
from ranch.rooms import parts as room_parts

CONFIG = """
agents:
  - id: echo
    kind: echo
"""
UPPER = "HTTPS://files.example/x.pdf"
NOTE = "[ranch] a file link that is not http(s) was left out (x.pdf)"


def with_link(url: str) -> Message:
    parts = [Part(text="see"), Part(url=url, filename="x.pdf")]
    return Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=parts)


def accepted(url: str) -> bool:
    """Whether a caller's message holding `url` passes the check every entry runs."""
    try:
        check_message(with_link(url), Limits())
    except InvalidInput as refused:
        assert refused.field == "message.parts[1].url"
        return False
    return True


def kept(url: str) -> bool:
    """Whether a room stores `url` as an agent answered it (else a note stands in its place)."""
    stored = room_parts.stored([Part(text="see"), Part(url=url, filename="x.pdf")])
    assert stored is not None
    if stored[1] == {"text": NOTE}:
        return False
    assert stored[1]["url"] == url
    return True


@pytest.mark.parametrize(
    "url", [UPPER, "HTTP://files.example/x.pdf", "Https://files.example/x.pdf", "hTtP://files.example/x"]
)
def test_an_http_url_is_accepted_and_kept_whatever_the_case_of_its_scheme(url: str) -> None:
    assert accepted(url)
    assert kept(url)


@pytest.mark.parametrize(
    "url", ["JAVASCRIPT:alert(1)", "File:///etc/passwd", "FTP://files.example/x", "HTTPX://files.example/x"]
)
def test_other_schemes_are_refused_and_left_out_whatever_their_case(url: str) -> None:
    assert not accepted(url)
    assert not kept(url)


def a2a_send(url: str, parts: list[dict[str, Any]], context_id: str) -> dict[str, Any]:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": parts, "contextId": context_id}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer: dict[str, Any] = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=10).json()
    return answer


def test_an_upper_case_scheme_passes_a2a_into_a_room_and_the_agents_answer_keeps_it(
    database_url: str,
) -> None:
    link = {"url": UPPER, "filename": "x.pdf", "mediaType": "application/pdf"}
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = admin.post("/rooms", {"title": "files", "participants": [{"kind": "agent", "id": "echo"}]})[
            "id"
        ]
        answer = a2a_send(hub.agent_url("echo"), [{"text": "by A2A"}, link], room)
        assert "error" not in answer, answer
        messages = admin.messages(room)
    # the caller's message (checked by `check_file_url`) and echo's answer holding the same link
    # (an agent's answer, stored by `web_url`), each with the URL as it was written
    senders = sorted(m["sender"]["kind"] for m in messages if m["parts"] == [link])
    assert senders == ["agent", "user"], messages
