"""The outbound guard: every address a host resolves to must be one ranch may call.

Refused always: cloud-metadata addresses (169.254.169.254, fd00:ec2::254 and
their neighbours), link-local, multicast, unspecified, reserved and other
non-global addresses. Refused unless `allow_loopback` (local development):
loopback, private (RFC 1918, fc00::/7) and shared CGNAT (100.64.0.0/10). An
IPv4-mapped or NAT64 IPv6 address is judged as the IPv4 address inside it.

`check` judges a URL up front (a clear error when a webhook or an agent is
registered); `addresses` judges a host when a connection is made to it, and is
what `policy/egress.py` connects through, so a name that answers differently a
moment later (DNS rebinding) is never connected to unchecked.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio

from ranch.exceptions import UnsafeUrl

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[Sequence[str]]]
Exemption = Callable[[IPAddress, int], bool]
"""(address, port) -> True to let it through whatever its kind (tests: one peer on 127.0.0.1)."""

METADATA = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "169.254.169.253", "fd00:ec2::254", "100.100.100.200")
)
"""AWS, ECS, AWS DNS, AWS IPv6, Alibaba: instance-metadata and credential endpoints."""
CGNAT = ipaddress.ip_network("100.64.0.0/10")
NAT64 = ipaddress.ip_network("64:ff9b::/96")
LOCAL_REASONS = frozenset({"a loopback address", "a private address", "a shared (CGNAT) address"})
"""What `allow_loopback` lets through; everything else stays refused."""
SWITCH = "--allow-private-outbound"
"""The `ranch serve` flag behind `allow_loopback` (its old name, --allow-loopback-webhooks, still works)."""


def embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address inside an IPv4-mapped (::ffff:a.b.c.d) or NAT64 (64:ff9b::a.b.c.d) address."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def refusal(address: IPAddress) -> str | None:
    """Why ranch will not call `address`, or None when it is a public unicast address."""
    address = embedded_ipv4(address)
    if address in METADATA:
        return "a cloud metadata address"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if address in CGNAT:
        return "a shared (CGNAT) address"
    if address.is_reserved:
        return "a reserved address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "a reserved address"
    return None


async def system_resolver(host: str, port: int) -> Sequence[str]:
    infos = await anyio.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True)
class Target:
    """A URL that passed the guard, and the addresses its host resolved to."""

    url: str
    host: str
    addresses: tuple[IPAddress, ...]


class UrlGuard:
    """Judges what tenants can steer ranch to call: webhooks, their agents' URLs, cards and providers."""

    def __init__(
        self,
        *,
        allow_loopback: bool = False,
        resolver: Resolver = system_resolver,
        exempt: Exemption | None = None,
    ) -> None:
        self.allow_loopback = allow_loopback
        self._resolve = resolver
        self._exempt = exempt

    async def check(self, url: str) -> Target:
        """The URL's target when every address its host resolves to is allowed; else `UnsafeUrl`."""
        try:
            parts = urlsplit(url)
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError as exc:
            raise UnsafeUrl(url, f"not a valid URL ({exc})") from exc
        if parts.scheme not in ("http", "https"):
            raise UnsafeUrl(url, "only http and https URLs are called")
        host = parts.hostname
        if not host:
            raise UnsafeUrl(url, "the URL has no host")
        if parts.username is not None or parts.password is not None:
            raise UnsafeUrl(url, "credentials in the URL are not accepted; use the config's token")
        try:
            addresses = await self._addresses(host, port)
        except OSError as exc:
            raise UnsafeUrl(url, f"the host {host!r} does not resolve ({exc})") from exc
        reason = self.judge(host, port, addresses)
        if reason is not None:
            raise UnsafeUrl(url, reason)
        return Target(url=url, host=host, addresses=addresses)

    async def addresses(self, host: str, port: int) -> tuple[IPAddress, ...]:
        """Resolve `host` once and judge every answer: the addresses a connection may use.

        Raises `OSError` when the host does not resolve, `PermissionError` (an OSError)
        naming the address and why when one of them is refused.
        """
        addresses = await self._addresses(host, port)
        reason = self.judge(host, port, addresses)
        if reason is not None:
            raise PermissionError(f"refusing to connect to {host}:{port}: {reason}")
        return addresses

    def judge(self, host: str, port: int, addresses: Sequence[IPAddress]) -> str | None:
        """Why ranch will not call `host` at these addresses, or None when it may."""
        for address in addresses:
            if self._exempt is not None and self._exempt(address, port):
                continue
            reason = refusal(address)
            if reason is None or (self.allow_loopback and reason in LOCAL_REASONS):
                continue
            where = f"{host} is" if _literal(host) == address else f"{host} resolves to {address},"
            hint = f" (allowed only with {SWITCH}, for local development)"
            return f"{where} {reason}" + (hint if reason in LOCAL_REASONS else "")
        return None

    async def _addresses(self, host: str, port: int) -> tuple[IPAddress, ...]:
        answers = await self._resolve(host.strip("[]"), port)
        addresses = tuple(ipaddress.ip_address(answer.split("%", 1)[0]) for answer in answers)
        if not addresses:
            raise OSError("no addresses")
        return addresses


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None
