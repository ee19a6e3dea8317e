"""Slots for page reads: the memory a server keeps for answers not yet read is bounded.

A page of a room's messages or events is built whole (up to rooms/pages.py PAGE_BYTES of stored
data) and written by the ASGI server as fast as the client reads it. A client that asks and then
does not read keeps that page in memory (security-audit-2 N9), so each page read takes a slot,
held until its body has been sent: at most PER_CALLER at once per caller and TOTAL per process.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from ranch.exceptions import RateLimited, ServerBusy
from ranch.identity.principal import Principal

PER_CALLER = 4
"""Page reads one caller (organization, kind and id) may have unsent at once."""
TOTAL = 32
"""Page reads the process may have unsent at once, over every caller."""
PIECE_BYTES = 65_536
"""Bytes of a page handed to the ASGI server at a time."""
RETRY_AFTER = 1.0
"""Seconds a refused read is told to wait: a page is sent in well under that to a reading client."""


class PageReads:
    """Who holds how many page-read slots now."""

    def __init__(self, per_caller: int = PER_CALLER, total: int = TOTAL) -> None:
        self.per_caller, self.total = per_caller, total
        self.held: dict[str, int] = {}

    @property
    def in_use(self) -> int:
        return sum(self.held.values())

    def take(self, principal: Principal) -> Callable[[], None]:
        """A slot for `principal`, and the function that gives it back (once; later calls do nothing);
        RateLimited over the caller's share, ServerBusy over the process's."""
        who = f"{principal.org_id}:{principal.kind}:{principal.id}"
        if self.held.get(who, 0) >= self.per_caller:
            raise RateLimited(f"page reads of {who} (at most {self.per_caller} unsent at once)", RETRY_AFTER)
        if self.in_use >= self.total:
            raise ServerBusy(f"the server is sending {self.total} pages at once, its limit of page reads")
        self.held[who] = self.held.get(who, 0) + 1
        given_back = False

        def release() -> None:
            nonlocal given_back
            if not given_back:
                given_back = True
                left = self.held[who] - 1
                if left:
                    self.held[who] = left
                else:
                    del self.held[who]

        return release


class HeldResponse(JSONResponse):
    """A JSON answer that gives its page-read slot back once its body has been sent (or the client
    has gone), however the sending ends."""

    def __init__(self, content: Any, release: Callable[[], None]) -> None:
        super().__init__(content)
        self.release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The body in pieces: the ASGI server waits for its buffer to drain before taking the next
        piece (not after the last), so the final empty piece returns once the body is nearly out."""
        try:
            await send(
                {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
            )
            body = memoryview(self.body)
            for start in range(0, len(body), PIECE_BYTES):
                piece = bytes(body[start : start + PIECE_BYTES])
                await send({"type": "http.response.body", "body": piece, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.release()


async def held_page(reads: PageReads, principal: Principal, build: Callable[[], Any]) -> HeldResponse:
    """The JSON of `await build()` as an answer holding a slot of `principal`'s from before the read
    until after the send."""
    release = reads.take(principal)
    try:
        content = await build()
    except BaseException:
        release()
        raise
    return HeldResponse(content, release)
