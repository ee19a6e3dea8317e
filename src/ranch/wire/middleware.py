"""ASGI middleware for a wire concern of the full stack: the activated-extensions header."""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

EXTENSIONS_HEADER = b"a2a-extensions"
LEGACY_EXTENSIONS_HEADER = b"x-a2a-extensions"
"""A2A 0.3's name for the header; 0.3 servers accept and emit both names."""
VERSION_HEADER = b"a2a-version"
SCOPE_KEY = "ranch"
"""`scope["ranch"]` is a dict a handler fills; `activated` lists the extensions to echo."""


class ActivatedExtensions:
    """Echo the extensions a handler activated in the response's `A2A-Extensions` header.

    A request served as A2A 0.3 (no `A2A-Version`, or 0.x) may name them in `X-A2A-Extensions`
    too (the SDK's 0.3 adapters read both), and its response carries both names.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        asked, legacy = _asked(scope) if scope["type"] == "http" else (False, False)
        if not asked:
            await self.app(scope, receive, send)  # nothing asked for, nothing to activate
            return
        state: dict[str, Any] = scope.setdefault(SCOPE_KEY, {})
        names = (EXTENSIONS_HEADER, LEGACY_EXTENSIONS_HEADER) if legacy else (EXTENSIONS_HEADER,)

        async def send_with_header(message: Message) -> None:
            if message["type"] == "http.response.start" and state.get("activated"):
                value = ",".join(state["activated"]).encode()
                message = {**message, "headers": [*message.get("headers", []), *((n, value) for n in names)]}
            await send(message)

        await self.app(scope, receive, send_with_header)


def _asked(scope: Scope) -> tuple[bool, bool]:
    """Whether the request names extensions, and whether it is served as A2A 0.3."""
    asked, version = False, b""
    for name, value in scope["headers"]:
        if name == EXTENSIONS_HEADER or name == LEGACY_EXTENSIONS_HEADER:
            asked = True
        elif name == VERSION_HEADER:
            version = value.strip()
    return asked, not version.startswith(b"1")
