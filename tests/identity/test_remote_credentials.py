"""Per-agent credentials: a remote agent's `headers` go with the card fetch and every call, to the
origin of its `url` only, and never show in its card, its errors or the logs."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from a2a.server.routes import create_agent_card_routes
from a2a.types import AgentCard, AgentInterface
from starlette.applications import Starlette
from starlette.middleware import Middleware

from _support.hubkit import ADMIN_KEY, Api, serve_ranch
from _support.peers import PeerRecorder, RecordingMiddleware, peer_card, running_peer
from _support.servers import ServerThread
from ranch.wire.client import ForeignInterface, same_origin

SECRET = "s3cr3t-peer-token"


def ask(url: str) -> dict[str, object]:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer: dict[str, object] = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=30).json()
    return answer


def test_headers_go_with_the_card_fetch_and_the_calls_and_nowhere_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PEER_TOKEN", SECRET)
    with running_peer("plain") as peer:
        config = f"""
agents:
  - id: partner
    kind: remote
    url: {peer.url}
    headers: {{Authorization: "Bearer ${{PEER_TOKEN}}"}}
  - id: gone
    kind: remote
    url: http://127.0.0.1:1
    headers: {{X-API-Key: "${{PEER_TOKEN}}"}}
"""
        with caplog.at_level(logging.DEBUG), serve_ranch(config, tmp_path / "t.db") as ranch:
            assert "result" in ask(ranch.agent_url("partner"))
            card = httpx.get(f"{ranch.agent_url('partner')}/.well-known/agent-card.json").text
            failed = ask(ranch.agent_url("gone"))
    fetches = [r for r in peer.recorder.requests if r.method == "GET"]
    assert fetches and all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in fetches)
    assert all(r.headers.get("authorization") == f"Bearer {SECRET}" for r in peer.recorder.posts())
    assert "agent 'gone'" in str(failed)
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith(("ranch", "uvicorn")))
    for text in (card, str(failed), ours):  # (the peer's own a2a-sdk debug log shows what it received)
        assert SECRET not in text


@contextmanager
def card_only(card: AgentCard) -> Iterator[tuple[str, PeerRecorder]]:
    """A server on 127.0.0.1 that serves `card` and nothing else; yields its URL and what reached it."""
    recorder = PeerRecorder()
    app = Starlette(
        routes=create_agent_card_routes(card), middleware=[Middleware(RecordingMiddleware, recorder=recorder)]
    )
    with ServerThread(app, name="card-only") as server:
        yield server.url, recorder


def test_headers_never_follow_a_card_to_another_origin(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The card at `url` names an agent on another port of 127.0.0.1: an agent with headers refuses to
    call it, saying why, and that agent never receives a request; one without headers calls it."""
    monkeypatch.setenv("PEER_TOKEN", SECRET)
    with running_peer("plain") as elsewhere, card_only(peer_card("plain", base_url=elsewhere.url)) as front:
        front_url, front_seen = front
        config = f"""
agents:
  - id: keyed
    kind: remote
    url: {front_url}
    headers: {{Authorization: "Bearer ${{PEER_TOKEN}}"}}
  - id: bare
    kind: remote
    url: {front_url}
"""
        with serve_ranch(config, tmp_path / "t.db") as ranch:
            failed = str(ask(ranch.agent_url("keyed")))
            assert elsewhere.recorder.requests == []  # not the message, let alone the header
            registered = Api(ranch.url, ADMIN_KEY).call(
                "POST",
                "/agents",
                {"id": "late", "kind": "remote", "url": front_url, "headers": {"X-Key": SECRET}},
            )
            assert elsewhere.recorder.requests == []
            assert "plain saw: hi" in str(ask(ranch.agent_url("bare")))
    assert "agent 'keyed'" in failed and f"sends calls to {elsewhere.url}/" in failed, failed
    assert "another origin than its url" in failed and SECRET not in failed, failed
    assert registered.status_code == 422, registered.text
    error = registered.json()["error"]
    assert error["field"] == "url" and SECRET not in error["message"], error
    assert error["message"].startswith(f"agent 'late': its card sends calls to {elsewhere.url}/"), error
    assert [r.headers.get("authorization") for r in elsewhere.recorder.posts()] == [None]  # bare's call
    # the card itself is fetched from url's own origin, with the headers
    assert f"Bearer {SECRET}" in [r.headers.get("authorization") for r in front_seen.requests]


@pytest.mark.parametrize(
    ("url", "interface", "same"),
    [
        ("http://peer.example/agents/a", "http://PEER.example:80/", True),
        ("https://peer.example", "https://peer.example:443/rpc", True),
        ("http://peer.example", "https://peer.example/", False),
        ("http://127.0.0.1:8001", "http://127.0.0.1:8002/", False),
        ("http://127.0.0.1:8001", "http://localhost:8001/", False),
        ("http://peer.example", "not a url", False),
    ],
)
def test_same_origin_is_scheme_host_and_port(url: str, interface: str, same: bool) -> None:
    card = AgentCard(
        name="p",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=interface)
        ],
    )
    if same:
        same_origin(url, card)
    else:
        with pytest.raises(ForeignInterface, match=r"supportedInterfaces\[0\]\.url"):
            same_origin(url, card)


def test_interfaces_ranch_never_calls_are_not_judged() -> None:
    """A gRPC interface on its own port is common; ranch calls JSON-RPC and HTTP+JSON only."""
    card = AgentCard(
        name="p",
        supported_interfaces=[
            AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url="http://peer.example/"),
            AgentInterface(protocol_binding="GRPC", protocol_version="1.0", url="peer.example:50051"),
        ],
    )
    same_origin("http://peer.example", card)
