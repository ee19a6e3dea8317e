"""Per-agent credentials: a remote agent's `headers` go with the card fetch and every call,
and never show in its card, its errors or the logs."""

from __future__ import annotations

import logging
import uuid
from pathlib import Path

import httpx
import pytest

from _support.hubkit import serve_ranch
from _support.peers import running_peer

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
