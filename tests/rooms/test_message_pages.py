"""Message and event pages are bounded in bytes as well as rows, and `next_cursor` walks them all.

100 messages of 50 KB are 5 MB: more than one page may hold (rooms/pages.py PAGE_BYTES), even with
`limit=200`. Each page answered over HTTP stays near the bound, and following `next_cursor` gives
every message exactly once, in order; a `before` window keeps the newest that fit.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx

from _support.hubkit import ADMIN_KEY, Api, serve_ranch
from ranch.rooms.pages import PAGE_BYTES

COUNT = 100
TEXT = 50_000
SLACK = 64 * 1024
"""JSON framing of a page beyond the stored sizes it was cut by."""


def walk(api: Api, path: str) -> tuple[list[dict[str, Any]], list[int]]:
    """Every item of a `since` listing, following `next_cursor`; and each page's size in bytes."""
    items: list[dict[str, Any]] = []
    sizes: list[int] = []
    since = 0
    for _ in range(COUNT + 1):
        answer = api.call("GET", path, since=since, limit=200)
        assert answer.status_code == 200, answer.text
        sizes.append(len(answer.content))
        page = answer.json()
        items += page["items"]
        if page["next_cursor"] is None:
            return items, sizes
        since = int(page["next_cursor"])
    raise AssertionError("next_cursor never ended")


def test_pages_of_big_messages_are_cut_by_bytes_and_next_cursor_walks_every_message_once(
    database_url: str,
) -> None:
    with serve_ranch("agents: []\n", database_url, caller_rate=None) as hub:
        api = Api(hub.url, ADMIN_KEY)
        room = api.post("/rooms", {"title": "big"})["id"]
        with httpx.Client(base_url=f"{hub.url}/api/v1", headers={"X-API-Key": ADMIN_KEY}, timeout=30) as c:
            for n in range(COUNT):
                assert (
                    c.post(f"/rooms/{room}/messages", json={"text": f"{n} " + "x" * TEXT}).status_code == 201
                )

        messages, sizes = walk(api, f"/rooms/{room}/messages")
        assert len(sizes) > 1, "one page held every message"
        assert max(sizes) <= PAGE_BYTES + SLACK  # each text once: in `text`, not again in `parts`
        assert all(m["parts"] == [] for m in messages)
        assert [m["text"].split(" ")[0] for m in messages] == [str(n) for n in range(COUNT)]

        events, sizes = walk(api, f"/rooms/{room}/events")
        assert len(sizes) > 1 and max(sizes) <= 2 * PAGE_BYTES + SLACK
        cursors = [e["cursor"] for e in events]
        assert cursors == sorted(set(cursors)) and len(cursors) >= COUNT

        newest = api.get(f"/rooms/{room}/messages", before=2**63 - 1, limit=200)
        kept = [m["text"].split(" ")[0] for m in newest["items"]]
        assert 0 < len(kept) < COUNT and kept == [str(n) for n in range(COUNT - len(kept), COUNT)]


SLOW_READERS = 6
"""Raw connections of one caller that ask for a big page and read nothing: 4 are held, 2 refused."""
BIG = 90_000


def slow_reader(port: int, path: str, key: str) -> socket.socket:
    """A connection with a tiny receive buffer that asks for `path` and reads nothing of the answer."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1024)  # loopback's 64 KB segments would let
    # the kernel's send buffer (sized from them) take a whole page off the server at once
    sock.connect(("127.0.0.1", port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nX-API-Key: {key}\r\n\r\n".encode())
    return sock


def status_of(sock: socket.socket, within: float = 20) -> tuple[int, bytes]:
    """The status of the answer arriving on `sock`, and its head, peeked: nothing is read off it."""
    sock.settimeout(within)
    head = sock.recv(2048, socket.MSG_PEEK)
    assert head.startswith(b"HTTP/1.1 "), head
    return int(head[9:12]), head


def test_unsent_pages_hold_a_slot_each_four_per_caller_and_are_given_back(tmp_path: Path) -> None:
    with serve_ranch("agents: []\n", tmp_path / "hub.db", caller_rate=None) as hub:
        api = Api(hub.url, ADMIN_KEY)
        bob_key = api.post("/users", {"id": "bob", "name": "Bob"})["api_key"]
        room = api.post("/rooms", {"title": "big", "participants": [{"kind": "user", "id": "bob"}]})["id"]
        for n in range(24):
            api.post(f"/rooms/{room}/messages", {"text": f"{n} " + "y" * BIG})
        port = int(hub.url.rsplit(":", 1)[1])
        path = f"/api/v1/rooms/{room}/messages?since=0&limit=200"

        readers = [slow_reader(port, path, ADMIN_KEY) for _ in range(SLOW_READERS)]
        try:
            answers = [status_of(sock) for sock in readers]
            assert sorted(status for status, _ in answers) == [200] * 4 + [429] * 2
            refused = next(head for status, head in answers if status == 429)
            assert b"retry-after: 1" in refused.lower() and b"RATE_LIMITED" in refused
            assert b"at most 4 unsent at once" in refused
            assert Api(hub.url, bob_key).call("GET", f"/rooms/{room}/messages").status_code == 200
            assert api.call("GET", f"/rooms/{room}/messages").status_code == 429
        finally:
            for sock in readers:
                sock.close()

        for _ in range(200):  # the server sees the readers gone and gives their slots back
            if api.call("GET", f"/rooms/{room}/messages").status_code == 200:
                break
        else:
            raise AssertionError("the closed readers' slots were never given back")
        again = [slow_reader(port, path, ADMIN_KEY) for _ in range(4)]
        try:
            assert [status_of(sock)[0] for sock in again] == [200] * 4
        finally:
            for sock in again:
                sock.close()
