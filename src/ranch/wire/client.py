"""Outbound A2A calls: one shared httpx pool, cached cards, one SDK client per card.

Every remote agent of one trust level shares a `ClientPool`, so connections are
reused across agents and hops: the hub keeps one for the operator's config agents
and one, whose transport judges every connection (policy/egress.py), for the
agents tenants register. Cards are fetched with ranch's own bounded read (a short
timeout, a size cap; the SDK's resolver would log each whole card) and parsed by
the SDK; they are trusted for `ttl` seconds, then revalidated with `If-None-Match` when the peer
sent an `ETag` (a 304 keeps the cached card and client: no whole card is read again), and a
failed fetch is remembered for `card_retry` seconds so a team's turns do not each wait for a
dead card endpoint.
Every response body, and every event of a stream, is read at most up to
`read_limit` bytes: a member cannot make ranch buffer an unbounded reply.

An agent's `headers` (its credentials) go only to the origin (scheme, host and
port) of the URL they were configured with: a card fetched with headers whose
interfaces send calls to another origin is refused (`ForeignInterface`), so a
peer's card cannot redirect the credentials to a host the operator never named.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.types import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from google.protobuf import json_format

from ranch.policy.egress import outbound_client
from ranch.policy.ssrf import UrlGuard

DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=60.0, write=30.0, pool=10.0)
DEFAULT_LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50)
DEFAULT_CARD_TIMEOUT = 5.0
DEFAULT_MAX_CARD_BYTES = 512 * 1024
DEFAULT_MAX_REPLY_BYTES = 100_000
CARD_RETRY = 30.0
"""Seconds a failed card fetch is remembered: callers get the same error at once meanwhile."""
READ_FACTOR = 8
READ_FLOOR = 4 * 1024 * 1024
"""A body or stream event may be READ_FACTOR x max_reply_bytes (at least READ_FLOOR): room for the
task history a peer echoes back around its reply, which is checked on its own once folded."""

Verify = Callable[[AgentCard], None]
"""Checks a fetched card; raises when it must not be used."""
TransportFactory = Callable[[], httpx.AsyncBaseTransport]
"""Makes the transport of a pool's clients (a guarded one for tenants' agents)."""
BINDINGS = [TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON]
"""The protocol bindings ranch calls peers over, in order of preference."""


class CardError(Exception):
    """An agent card could not be fetched or read; the message says why, naming any limit."""


class ForeignInterface(CardError):
    """A card fetched with an agent's headers sends calls to another origin than the agent's URL."""


class ResponseTooLarge(httpx.ReadError):
    """A peer sent more bytes in one body (or one stream event) than ranch reads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"more than {limit} bytes in one response body or stream event")


@dataclass
class _CachedCard:
    card: AgentCard
    fetched: float
    client: Client | None
    """None for a card listing no HTTP binding ranch speaks (a gRPC-only peer: agents/remote_grpc.py)."""
    etag: str | None = None
    """The peer's `ETag` for this card: the next fetch asks `If-None-Match` with it."""


class ClientPool:
    """The outbound A2A client of one trust level: open it once, share it, close it at shutdown."""

    def __init__(
        self,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        limits: httpx.Limits = DEFAULT_LIMITS,
        *,
        transport: TransportFactory | None = None,
        guard: UrlGuard | None = None,
        card_timeout: float = DEFAULT_CARD_TIMEOUT,
        max_card_bytes: int = DEFAULT_MAX_CARD_BYTES,
        max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES,
        card_retry: float = CARD_RETRY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.card_timeout = card_timeout
        self._clock = clock
        """The seconds `card_ttl` and `card_retry` count (a test's clock, or the embedder's)."""
        self.max_card_bytes = max_card_bytes
        self.max_reply_bytes = max_reply_bytes
        """Largest folded reply a member may give (agents/remote.py checks it)."""
        self.read_limit = max(READ_FACTOR * max_reply_bytes, READ_FLOOR)
        self.card_retry = card_retry
        self._transport = transport
        self.guard = guard
        """Judges the addresses of calls the transport does not make (gRPC members: agents/remote_grpc.py)."""
        self._http = self.new_client(timeout=timeout, limits=limits)
        self._factory = ClientFactory(
            ClientConfig(
                httpx_client=self._http,
                streaming=True,
                supported_protocol_bindings=list(BINDINGS),
            )
        )
        self._cards: dict[tuple[bool, str, tuple[tuple[str, str], ...]], _CachedCard] = {}
        """(verified, url, headers) -> card: one caller's credentials never serve another's fetch."""
        self._failures: dict[tuple[bool, str, tuple[tuple[str, str], ...]], tuple[float, str]] = {}
        self._fetching: dict[tuple[bool, str, tuple[tuple[str, str], ...]], anyio.Lock] = {}

    @property
    def http(self) -> httpx.AsyncClient:
        return self._http

    @property
    def guarded(self) -> bool:
        """True when this pool's connections are judged (a tenant's agents)."""
        return self._transport is not None

    def new_client(self, **kwargs: Any) -> httpx.AsyncClient:
        """An httpx client of this pool's kind (model providers, MCP servers): same transport rules,
        the same read limit, no redirects followed (`policy.egress.outbound_client`)."""
        transport = self._transport() if self._transport is not None else None
        kwargs["event_hooks"] = {"response": [self._bound_response]}
        return outbound_client(transport, **kwargs)

    async def _bound_response(self, response: httpx.Response) -> None:
        stream = response.stream
        assert isinstance(stream, httpx.AsyncByteStream)
        event_stream = "text/event-stream" in response.headers.get("content-type", "")
        response.stream = _BoundedStream(stream, self.read_limit, per_event=event_stream)

    async def card(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        ttl: float = 300.0,
        verify: Verify | None = None,
    ) -> AgentCard:
        """The agent card at `url`, from cache while younger than `ttl` seconds.

        `verify` checks a freshly fetched card (its signatures) before it is cached or used;
        whatever it raises reaches the caller. A fetch that fails raises `CardError`.
        """
        return (await self._entry(url, headers, ttl, verify)).card

    async def client(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        ttl: float = 300.0,
        verify: Verify | None = None,
    ) -> Client:
        """An SDK client for the agent at `url`, built from its (cached, verified) card."""
        client = (await self._entry(url, headers, ttl, verify)).client
        if client is None:
            raise CardError(f"the agent card at {url} lists no JSON-RPC or HTTP+JSON interface")
        return client

    async def resolve(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        ttl: float = 300.0,
        verify: Verify | None = None,
    ) -> tuple[AgentCard, Client | None]:
        """The card and the SDK client built from that same card (a call checks what it will use)."""
        entry = await self._entry(url, headers, ttl, verify)
        return entry.card, entry.client

    def forget(self, url: str) -> None:
        """Drop a cached card, e.g. after the agent stopped answering."""
        for key in [key for key in self._cards if key[1] == url]:
            del self._cards[key]

    async def _entry(
        self, url: str, headers: dict[str, str] | None, ttl: float, verify: Verify | None
    ) -> _CachedCard:
        # an unverified fetch never serves a verifying agent, nor one caller's credentials another
        key = (verify is not None, url, tuple(sorted((headers or {}).items())))
        lock = self._fetching.setdefault(key, anyio.Lock())
        async with lock:  # one fetch at a time per card; the others use its result
            cached = self._cards.get(key)
            if cached is not None and self._clock() - cached.fetched < ttl:
                return cached
            failed = self._failures.get(key)
            if failed is not None and self._clock() - failed[0] < self.card_retry:
                raise CardError(failed[1])
            try:
                card, etag = await self._fetch(url, headers, cached.etag if cached is not None else None)
            except CardError as exc:
                self._failures[key] = (self._clock(), str(exc))
                raise
            self._failures.pop(key, None)
            if card is None:  # 304: the cached card is still the peer's card
                assert cached is not None
                cached.fetched = self._clock()
                return cached
            if verify is not None:
                verify(card)
            if headers:
                same_origin(url, card)
            try:
                client: Client | None = self._factory.create(card)
            except ValueError:  # no JSON-RPC or HTTP+JSON interface: the member may speak gRPC
                client = None
            entry = _CachedCard(card=card, fetched=self._clock(), client=client, etag=etag)
            self._cards[key] = entry
            return entry

    async def _fetch(
        self, url: str, headers: dict[str, str] | None, etag: str | None = None
    ) -> tuple[AgentCard | None, str | None]:
        """GET the card within `card_timeout`, reading at most `max_card_bytes`; parse it with the SDK.

        With `etag`, ask `If-None-Match`: (None, etag) when the peer answers 304 Not Modified."""
        target = f"{url.rstrip('/')}{AGENT_CARD_WELL_KNOWN_PATH}"
        sent = dict(headers or {})
        if etag is not None:
            sent["If-None-Match"] = etag
        try:
            with anyio.fail_after(self.card_timeout):
                body, etag = await self._read_card(target, sent)
        except TimeoutError as exc:
            raise CardError(f"no card from {target} within {self.card_timeout:g}s (card_timeout)") from exc
        except httpx.HTTPError as exc:
            raise CardError(f"cannot fetch {target}: {_reason(exc)}") from exc
        if body is None:
            return None, etag
        try:
            data = json.loads(body)
            return parse_agent_card(data), etag
        except (ValueError, json_format.ParseError) as exc:
            raise CardError(f"{target} is not a valid agent card: {exc}") from exc

    async def _read_card(self, target: str, headers: dict[str, str]) -> tuple[bytes | None, str | None]:
        """The card's body and ETag; no body when the peer answers 304 to `If-None-Match`."""
        limit = self.max_card_bytes
        too_large = f"the card at {target} is larger than the limit of {limit} bytes (max_card_bytes)"
        async with self._http.stream("GET", target, headers=headers, timeout=self.card_timeout) as response:
            etag = response.headers.get("etag")
            if response.status_code == 304 and "If-None-Match" in headers:
                return None, etag or headers["If-None-Match"]
            if response.is_redirect:
                where = response.headers.get("location", "?")
                status = response.status_code
                raise CardError(f"{target} answered HTTP {status}; redirect to {where} not followed")
            if response.status_code >= 400:
                raise CardError(f"{target} answered HTTP {response.status_code}")
            if int(response.headers.get("content-length") or 0) > limit:
                raise CardError(too_large)
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > limit:
                    raise CardError(too_large)
            return bytes(body), etag

    async def aclose(self) -> None:
        self._cards.clear()
        await self._http.aclose()

    async def __aenter__(self) -> ClientPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def same_origin(url: str, card: AgentCard) -> None:
    """Raise `ForeignInterface` when an interface ranch could call is on another origin than `url`."""
    home = origin(url)
    for index, interface in enumerate(card.supported_interfaces):
        if interface.protocol_binding in BINDINGS and (home is None or origin(interface.url) != home):
            raise ForeignInterface(
                f"its card sends calls to {interface.url} (supportedInterfaces[{index}].url), another "
                f"origin than its url {url}: its headers go to that url's origin only, so ranch does not "
                "call it (if it is the same agent, set url to the origin its card names)"
            )


def origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of `url`, the port filled in from the scheme; None when it has none."""
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        port = parts.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        return None
    if not parts.hostname or port is None:
        return None
    return scheme, parts.hostname.lower(), port


def _reason(exc: httpx.HTTPError) -> str:
    text = str(exc)
    return text if text else type(exc).__name__


class _BoundedStream(httpx.AsyncByteStream):
    """A response body that raises `ResponseTooLarge` past `limit` bytes (per SSE event for streams)."""

    def __init__(self, inner: httpx.AsyncByteStream, limit: int, *, per_event: bool) -> None:
        self._inner = inner
        self._limit = limit
        self._per_event = per_event
        self._count = 0
        self._tail = b""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            self._count += len(chunk)
            if self._per_event:
                seen = self._tail + chunk
                end = max(seen.rfind(b"\n\n"), seen.rfind(b"\r\n\r\n"), seen.rfind(b"\r\r"))
                if end >= 0:  # an event ended in this chunk: count from there
                    self._count = len(seen) - end
                self._tail = seen[-3:]
            if self._count > self._limit:
                raise ResponseTooLarge(self._limit)
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()
