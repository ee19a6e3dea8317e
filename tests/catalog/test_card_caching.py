"""Cards are cacheable both ways: a hub sends Cache-Control, ETag and Last-Modified and answers 304
to a matching If-None-Match; ranch's own card cache revalidates with If-None-Match once a card's
`card_ttl` is over, so an unchanged card is never read whole again (counted at a real peer)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from _support.clock import Clock
from _support.hubkit import serve_ranch
from _support.peers import peer_card
from _support.servers import ServerThread, bind_socket
from ranch.wire.client import ClientPool

CONFIG = """
agents:
  - {id: greeter, kind: rules, rules: [{reply: "hi"}]}
  - {id: echo, kind: echo}
"""


def test_a_served_card_carries_cache_headers_and_answers_304_when_unchanged(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "d.db") as hub:
        url = f"{hub.url}/a2a/agents/greeter/.well-known/agent-card.json"
        first = httpx.get(url, timeout=10)
        assert first.status_code == 200
        etag = first.headers["etag"]
        assert first.headers["cache-control"] == "public, max-age=300"
        assert first.headers["last-modified"].endswith("GMT")
        again = httpx.get(url, headers={"If-None-Match": etag}, timeout=10)
        assert again.status_code == 304
        assert again.content == b""
        assert again.headers["etag"] == etag
        assert again.headers["last-modified"] == first.headers["last-modified"]
        stale = httpx.get(url, headers={"If-None-Match": '"other"'}, timeout=10)
        assert stale.status_code == 200
        assert stale.json() == first.json()
        other = httpx.get(f"{hub.url}/a2a/agents/echo/.well-known/agent-card.json", timeout=10)
        assert other.headers["etag"] != etag  # another agent's config: another version


class CountingPeer:
    """A card endpoint that sends an ETag and counts whole cards (200) and revalidations (304)."""

    def __init__(self) -> None:
        self.full = 0
        self.not_modified = 0
        self.version = 1
        self.url = ""

    def app(self) -> Starlette:
        async def card(request: Request) -> Response:
            etag = f'"v{self.version}"'
            if request.headers.get("if-none-match") == etag:
                self.not_modified += 1
                return Response(status_code=304, headers={"ETag": etag})
            self.full += 1
            body = agent_card_to_dict(peer_card("plain", base_url=self.url, name=f"peer v{self.version}"))
            return JSONResponse(body, headers={"ETag": etag})

        return Starlette(routes=[Route("/.well-known/agent-card.json", card)])


@pytest.mark.anyio
async def test_the_card_cache_revalidates_with_if_none_match_instead_of_refetching() -> None:
    peer = CountingPeer()
    with ServerThread(peer.app(), sock=bind_socket(), name="peer") as server:
        peer.url = server.url
        clock = Clock()
        async with ClientPool(clock=clock) as pool:
            first = await pool.card(server.url, ttl=10)
            clock.advance(5)
            await pool.card(server.url, ttl=10)  # fresh: not asked at all
            assert (peer.full, peer.not_modified) == (1, 0)
            for _ in range(3):
                clock.advance(11)
                again = await pool.card(server.url, ttl=10)
                assert again is first
            assert (peer.full, peer.not_modified) == (1, 3)
            peer.version = 2  # the peer's card changed: the next revalidation reads it whole
            clock.advance(11)
            changed = await pool.card(server.url, ttl=10)
            assert changed.name == "peer v2"
            assert (peer.full, peer.not_modified) == (2, 3)
