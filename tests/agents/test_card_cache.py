"""A remote agent's card is read once per `card_ttl`: reused within it, read again after it.

A real a2a-sdk peer on 127.0.0.1 records every request; the hub runs on a clock the test moves
(`Settings(clock=...)`), so the TTL is crossed exactly, never by waiting.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx

from _support.clock import Clock
from _support.hubkit import serve_ranch
from _support.peers import RunningPeer, running_peer

TTL = 60.0


def card_fetches(peer: RunningPeer) -> int:
    return sum(1 for r in peer.recorder.requests if r.method == "GET" and r.path.endswith("agent-card.json"))


def send(url: str, text: str) -> None:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=30)
    assert "result" in answer.json(), answer.text


def test_a_remote_card_is_reused_within_card_ttl_and_read_again_after(tmp_path: Path) -> None:
    clock = Clock(1_000.0)
    with running_peer("plain") as peer:
        config = f"agents:\n  - {{id: far, kind: remote, url: '{peer.url}', card_ttl: {TTL}}}\n"
        with serve_ranch(config, tmp_path / "t.db", clock=clock) as hub:
            url = hub.agent_url("far")
            send(url, "first")
            first = card_fetches(peer)
            assert first >= 1
            for n in range(3):
                clock.advance(TTL / 5)  # still within the TTL
                send(url, f"within {n}")
                httpx.get(f"{url}/.well-known/agent-card.json", timeout=10)  # its served card reads it too
            assert card_fetches(peer) == first  # reused: no new fetch
            clock.advance(TTL)  # past it
            send(url, "after")
            assert card_fetches(peer) == first + 1  # read again, once
            send(url, "again")
            assert card_fetches(peer) == first + 1
        assert len(peer.recorder.posts()) == 6  # every message reached the peer
