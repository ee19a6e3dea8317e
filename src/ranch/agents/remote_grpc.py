"""A remote member over gRPC: the a2a-sdk's gRPC client transport, sending the interface's tenant.

A card whose first interface ranch speaks is GRPC (or a member configured `binding: grpc`) is
called over gRPC. The outbound URL guard judges the target as it judges every outbound
connection: for a tenant's agent the host is resolved and judged here, and the channel dials the
judged address itself (the host stays the call's authority and TLS name), so no later lookup can
send the call elsewhere. grpcio is optional: without it such a member is unavailable, saying why.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from a2a.client import Client, ClientConfig
from a2a.client.base_client import BaseClient
from a2a.types import AgentCard, AgentInterface
from a2a.utils.constants import TransportProtocol

from ranch.exceptions import AgentUnavailable
from ranch.policy.ssrf import UrlGuard

GRPC = TransportProtocol.GRPC.value
HTTP = (TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value)
INSTALL = "pip install 'a2a-sdk[grpc]'"


def grpc_interface(card: AgentCard) -> AgentInterface | None:
    """The card's GRPC interface, A2A 1.0's first."""
    found = [i for i in card.supported_interfaces if i.protocol_binding == GRPC]
    found.sort(key=lambda i: not i.protocol_version.startswith("1."))
    return found[0] if found else None


def prefers_grpc(card: AgentCard) -> bool:
    """Whether the first interface ranch speaks on the card is GRPC (the card's order is its preference)."""
    for interface in card.supported_interfaces:
        if interface.protocol_binding == GRPC:
            return True
        if interface.protocol_binding in HTTP:
            return False
    return False


def target(url: str) -> tuple[str, int, bool]:
    """Host, port and TLS of a GRPC interface's URL: `host:port` (plain), `grpc://`, `grpcs://`,
    `http://` or `https://` (TLS for the last and grpcs)."""
    parts = urlsplit(url if "://" in url else f"grpc://{url}")
    if parts.scheme not in ("grpc", "grpcs", "http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not a gRPC target (host:port, or grpc://, grpcs://, https://)")
    tls = parts.scheme in ("grpcs", "https")
    return parts.hostname, parts.port or (443 if tls else 80), tls


def guard_url(url: str) -> str:
    """A GRPC interface's URL as the outbound guard judges URLs (`http(s)://host:port`); as it is when
    it is not a gRPC target (the guard then refuses it, saying why)."""
    try:
        host, port, tls = target(url)
    except ValueError:
        return url
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return f"{'https' if tls else 'http'}://{authority}"


async def grpc_client(
    agent_id: str, card: AgentCard, interface: AgentInterface, guard: UrlGuard | None, read_limit: int
) -> Client:
    """An SDK client calling `interface` over gRPC: the channel dials a judged address when `guard`
    is given, takes messages up to `read_limit` bytes, and every request carries the tenant."""
    try:
        import grpc
        from a2a.client.transports.grpc import GrpcTransport
        from a2a.client.transports.tenant_decorator import TenantTransportDecorator
    except ImportError as exc:
        raise AgentUnavailable(agent_id, f"its card asks for gRPC, and grpcio is missing: {INSTALL}") from exc
    try:
        host, port, tls = target(interface.url)
    except ValueError as exc:
        raise AgentUnavailable(agent_id, f"its card's GRPC interface: {exc}") from exc
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    dial = authority
    options: list[tuple[str, object]] = [("grpc.max_receive_message_length", read_limit)]
    if guard is not None:
        try:
            addresses = await guard.addresses(host, port)
        except PermissionError as exc:
            raise AgentUnavailable(agent_id, f"{exc}; an organization's agents may not call it") from exc
        except OSError as exc:
            raise AgentUnavailable(
                agent_id, f"cannot reach {authority}: {host} does not resolve ({exc})"
            ) from exc
        address = addresses[0]
        dial = f"[{address}]:{port}" if address.version == 6 else f"{address}:{port}"
        options.append(("grpc.default_authority", authority))
        if tls:
            options.append(("grpc.ssl_target_name_override", host))
    if tls:
        channel = grpc.aio.secure_channel(dial, grpc.ssl_channel_credentials(), options=options)
    else:
        channel = grpc.aio.insecure_channel(dial, options=options)
    transport = GrpcTransport(channel, card)
    chosen = TenantTransportDecorator(transport, interface.tenant) if interface.tenant else transport
    return BaseClient(card, ClientConfig(streaming=True), chosen, [])


def same_host(agent_id: str, url: str, grpc_url: str) -> None:
    """A member's credentials go to the host of its `url` only: a GRPC interface elsewhere is refused."""
    try:
        host = target(grpc_url)[0]
    except ValueError as exc:
        raise AgentUnavailable(agent_id, f"its card's GRPC interface: {exc}") from exc
    if host != urlsplit(url).hostname:
        raise AgentUnavailable(
            agent_id,
            f"its card sends gRPC calls to {host}, not to the host of its url ({url}); "
            "its headers (credentials) go to that host only",
        )
