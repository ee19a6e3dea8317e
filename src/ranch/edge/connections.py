"""Each connection's clock and each address's share of the server: what uvicorn leaves unbounded.

uvicorn closes a keep-alive connection left idle after a response, but waits for ever for a
request head that stops half-way, for a body that stalls, and takes any number of connections
from one address: a few thousand half-sent requests hold the server (security-audit-2 N8).
`GuardedHttpToolsProtocol` gives a request head `head_timeout` seconds from its first byte (a new
connection's first head, from the connection's opening), a request body `body_timeout` seconds
between two of its pieces, and closes a new connection at once when its address already holds
`per_address` open ones (a trusted proxy's address excepted: its connections carry many clients,
and it caps them itself). Answers and streams are not timed: only what the client still owes.

One timer per connection, re-armed when it fires rather than per request: a request costs two
clock reads and a few attribute writes. `ranch serve` runs it with or without write gathering
(`ranch.edge.coalesce`).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
import weakref
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol
from uvicorn.server import ServerState

logger = logging.getLogger(__name__)

HEAD_TIMEOUT = 10.0
"""Seconds a request's head (request line and headers) may take to arrive."""
BODY_TIMEOUT = 30.0
"""Seconds a request body may go without sending any of itself."""
PER_ADDRESS = 256
"""Connections one client address may hold open at once."""
WARN_EVERY = 30.0
"""Seconds between two log lines about refused connections (a flood must not flood the log)."""


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a client may take to send a request, and how many connections it may hold."""

    head_timeout: float = HEAD_TIMEOUT
    body_timeout: float = BODY_TIMEOUT
    per_address: int = PER_ADDRESS
    proxies: tuple[str, ...] = ()
    """Trusted proxies' addresses or networks (`--forwarded-allow-ips`): not capped."""


def proxy_networks(text: str, flag: str) -> tuple[str, ...]:
    """Comma-separated addresses or networks (`10.0.0.5, 10.1.0.0/16`), each checked; ValueError
    naming `flag` and the item otherwise. Empty: no proxy is trusted."""
    items = tuple(item.strip() for item in text.split(",") if item.strip())
    for item in items:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ValueError(
                f"{flag} {text}: {item!r} is not an IP address or network (e.g. 10.0.0.5 or 10.0.0.0/24)"
            ) from None
    return items


@lru_cache(maxsize=64)
def _networks(proxies: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(item, strict=False) for item in proxies)


def is_proxy(address: str, proxies: tuple[str, ...]) -> bool:
    """Whether `address` is one of the trusted proxies."""
    if not proxies:
        return False
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in _networks(proxies))


_open: weakref.WeakKeyDictionary[ServerState, dict[str, int]] = weakref.WeakKeyDictionary()
"""Each server's open connections per client address (one process may run several servers)."""
_warned_at = -1e9


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a head timeout, a body timeout and a per-address cap."""

    def __init__(
        self,
        config: Any,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
        *,
        limits: ConnectionLimits = ConnectionLimits(),
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = limits
        self._open = _open.setdefault(server_state, {})
        self._address: str | None = None
        """The client address this connection is counted against (None: not counted)."""
        self._deadline = 0.0
        """When what the client owes (a head, the next piece of a body) must have come; 0: nothing."""
        self._owes_head = False
        self._clock: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if not self._admit(transport):
            transport.close()
            return
        super().connection_made(transport)
        self._expect(self.limits.head_timeout, head=True)  # from the opening: a silent one goes too

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is None:  # refused by `_admit`: never served
            return
        self._stop_clock()
        self._release()
        super().connection_lost(exc)

    def _admit(self, transport: asyncio.Transport) -> bool:
        """Count the connection against its address; False when the address has its share already."""
        peer = transport.get_extra_info("peername")
        if not isinstance(peer, tuple) or not peer:
            return True  # a Unix socket: no address to share
        address = str(peer[0])
        held = self._open.get(address, 0)
        if held >= self.limits.per_address and not is_proxy(address, self.limits.proxies):
            _warn(f"connections from {address} refused: it holds {held}, the most one address may")
            return False
        self._open[address] = held + 1
        self._address = address
        return True

    def _release(self) -> None:
        address, self._address = self._address, None
        if address is not None:
            _release_from(self._open, address)

    # what the client owes, and when

    def _expect(self, seconds: float, *, head: bool) -> None:
        self._deadline = self.loop.time() + seconds
        self._owes_head = head
        if self._clock is None:
            self._clock = self.loop.call_at(self._deadline, self._on_clock)

    def _stop_clock(self) -> None:
        self._deadline = 0.0
        if self._clock is not None:
            self._clock.cancel()
            self._clock = None

    def _on_clock(self) -> None:
        self._clock = None
        if not self._deadline or self.transport.is_closing():
            return
        now = self.loop.time()
        if self._server_holds_it_up():
            self._deadline = max(self._deadline, now + self.limits.body_timeout)
        if now < self._deadline:
            self._clock = self.loop.call_at(self._deadline, self._on_clock)
            return
        if self._owes_head:
            self._head_too_late()
        else:
            logger.debug(
                "closed %s: its request body stalled for %g s", self.client, self.limits.body_timeout
            )
            self.transport.close()

    def _server_holds_it_up(self) -> bool:
        """Whether the wait is the server's: it stopped reading (a full buffer, a pipelined request
        waiting its turn), or the client waits for its `100 Continue` before sending the body."""
        cycle = self.cycle
        return self.flow.read_paused or (
            not self._owes_head and cycle is not None and cycle.waiting_for_100_continue
        )

    def _head_too_late(self) -> None:
        """408 to a client that began a head and did not finish it; a silent one is just closed (and
        so is one whose earlier request is still being answered: no 408 inside that answer)."""
        answering = self.cycle is not None and not self.cycle.response_complete
        if self.scope is not None and not answering:  # scope: set at a head's first byte (or the last)
            message = f"the request head did not arrive within {self.limits.head_timeout:g} s".encode()
            self.transport.write(
                STATUS_LINE[408] + b"content-type: text/plain; charset=utf-8\r\ncontent-length: "
                b"%d\r\nconnection: close\r\n\r\n%s" % (len(message), message)
            )
        self.transport.close()

    # parser callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if not self._deadline:  # a new connection's first head is timed from the opening
            self._expect(self.limits.head_timeout, head=True)

    def on_headers_complete(self) -> None:
        self._expect(self.limits.body_timeout, head=False)  # a body, if one comes, must keep coming
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._deadline = self.loop.time() + self.limits.body_timeout
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._deadline = 0.0  # the rest (the answer, a stream, keep-alive) is not the client's to hurry
        super().on_message_complete()

    def handle_websocket_upgrade(self) -> None:
        self._stop_clock()  # a WebSocket has its own pings
        super().handle_websocket_upgrade()
        address, self._address = self._address, None
        if address is not None:  # counted until the WebSocket's connection ends; the release holds
            # the count, not this protocol (kept alive for the socket's life, it cost memory a watcher)
            _then_release(self.transport.get_protocol(), partial(_release_from, self._open, address))


def _release_from(open_: dict[str, int], address: str) -> None:
    """One connection of `address` ended."""
    left = open_.get(address, 1) - 1
    if left > 0:
        open_[address] = left
    else:
        open_.pop(address, None)


def _then_release(protocol: asyncio.BaseProtocol, release: Any) -> None:
    """Make the protocol that took the connection over release its address's count when it ends."""
    lost = protocol.connection_lost

    def connection_lost(exc: Exception | None) -> None:
        release()
        lost(exc)

    protocol.connection_lost = connection_lost  # type: ignore[method-assign]


def _warn(line: str) -> None:
    global _warned_at
    now = time.monotonic()
    if now - _warned_at > WARN_EVERY:
        _warned_at = now
        logger.warning("%s (said at most every %g s)", line, WARN_EVERY)
