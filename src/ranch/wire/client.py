"""Outbound A2A calls: one shared httpx pool, cached cards, one SDK client per card.

Every remote agent in a process shares `ClientPool`, so connections are reused
across agents and hops. Cards are fetched with the a2a-sdk's resolver and
trusted for `ttl` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import AgentCard
from a2a.utils.constants import TransportProtocol

DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=60.0, write=30.0, pool=10.0)
DEFAULT_LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50)
Verify = Callable[[AgentCard], None]
"""Checks a fetched card; raises when it must not be used."""


@dataclass
class _CachedCard:
    card: AgentCard
    fetched: float
    client: Client


class ClientPool:
    """The process-wide outbound A2A client: open it once, share it, close it at shutdown."""

    def __init__(
        self, timeout: httpx.Timeout = DEFAULT_TIMEOUT, limits: httpx.Limits = DEFAULT_LIMITS
    ) -> None:
        self._http = httpx.AsyncClient(timeout=timeout, limits=limits, follow_redirects=False)
        self._factory = ClientFactory(
            ClientConfig(
                httpx_client=self._http,
                streaming=True,
                supported_protocol_bindings=[TransportProtocol.JSONRPC, TransportProtocol.HTTP_JSON],
            )
        )
        self._cards: dict[tuple[bool, str, tuple[tuple[str, str], ...]], _CachedCard] = {}
        """(verified, url, headers) -> card: one caller's credentials never serve another's fetch."""

    @property
    def http(self) -> httpx.AsyncClient:
        return self._http

    async def card(
        self,
        url: str,
        headers: dict[str, str] | None = None,
        ttl: float = 300.0,
        verify: Verify | None = None,
    ) -> AgentCard:
        """The agent card at `url`, from cache while younger than `ttl` seconds.

        `verify` checks a freshly fetched card (its signatures) before it is cached or used;
        whatever it raises reaches the caller.
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
        return (await self._entry(url, headers, ttl, verify)).client

    def forget(self, url: str) -> None:
        """Drop a cached card, e.g. after the agent stopped answering."""
        for key in [key for key in self._cards if key[1] == url]:
            del self._cards[key]

    async def _entry(
        self, url: str, headers: dict[str, str] | None, ttl: float, verify: Verify | None
    ) -> _CachedCard:
        # an unverified fetch never serves a verifying agent, nor one caller's credentials another
        key = (verify is not None, url, tuple(sorted((headers or {}).items())))
        cached = self._cards.get(key)
        if cached is not None and time.monotonic() - cached.fetched < ttl:
            return cached
        resolver = A2ACardResolver(self._http, url)
        card = await resolver.get_agent_card(http_kwargs={"headers": headers} if headers else None)
        if verify is not None:
            verify(card)
        entry = _CachedCard(card=card, fetched=time.monotonic(), client=self._factory.create(card))
        self._cards[key] = entry
        return entry

    async def aclose(self) -> None:
        self._cards.clear()
        await self._http.aclose()

    async def __aenter__(self) -> ClientPool:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
