"""Outbound HTTP that tenants can steer, checked when each connection is made.

`GuardedTransport` is httpx's own transport whose connections go through
`GuardedBackend`: the host is resolved once by the `UrlGuard`, every address is
judged, and the socket is opened to a judged address, never to the name (so
DNS rebinding cannot reach an unchecked one). TLS SNI, certificate checks and
the Host header still use the name. Whatever URL a request ends up at (a card's
interface URL, a provider's redirect target if one were followed) meets the
same check, because the check sits under every request rather than in front
of some. A refused connection raises `RefusedConnection`, an
`httpcore.ConnectError`, which httpx turns into an `httpx.ConnectError` with the
same message (and the refusal as its cause).
"""

from __future__ import annotations

import functools
import ssl
import typing

import anyio
import httpcore
import httpx

from ranch.policy.ssrf import UrlGuard

DEFAULT_LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50)


class RefusedConnection(httpcore.ConnectError):
    """The guard refused the address a connection would have gone to; the message says why."""


def refused(exc: BaseException) -> RefusedConnection | None:
    """The guard's refusal behind `exc`, if any: SDKs wrap it in their own errors, chain it as a
    cause or context, and (the MCP client's task groups) put it in exception groups."""
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, RefusedConnection):
            return current
        if isinstance(current, BaseExceptionGroup):
            pending.extend(current.exceptions)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
    return None


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolve with the guard, judge every address, connect to a judged one."""

    def __init__(self, guard: UrlGuard, inner: httpcore.AsyncNetworkBackend | None = None) -> None:
        self.guard = guard
        self._inner = inner or httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await self.guard.addresses(host, port)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host} took longer than {timeout:g}s") from exc
        except PermissionError as exc:
            raise RefusedConnection(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ConnectError(f"{host} does not resolve ({exc})") from exc
        failure: Exception | None = None
        for address in addresses:  # each one judged above; the first that answers is used
            try:
                return await self._inner.connect_tcp(
                    str(address), port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's interface
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise RefusedConnection(f"refusing to connect to the unix socket {path}")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


@functools.cache
def tls_context(trust_env: bool = True) -> ssl.SSLContext:
    """The certificate-checking TLS context every outbound client of this process shares.

    httpx makes one per client and parses the whole CA bundle each time (milliseconds of CPU), and
    each app makes several clients. Sharing is safe: ranch loads no client certificate into it, and
    every ranch client speaks HTTP/1.1, so the ALPN list httpcore sets on each connection is always
    the same. `trust_env` reads SSL_CERT_FILE / SSL_CERT_DIR as httpx does, once per process.
    """
    return httpx.create_ssl_context(trust_env=trust_env)


class GuardedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport with `GuardedBackend` under its pool; no proxies from the environment."""

    def __init__(self, guard: UrlGuard, limits: httpx.Limits = DEFAULT_LIMITS) -> None:
        context = tls_context(trust_env=False)
        super().__init__(verify=context, limits=limits, trust_env=False)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GuardedBackend(guard),
        )


def outbound_client(
    transport: httpx.AsyncBaseTransport | None = None, **kwargs: typing.Any
) -> httpx.AsyncClient:
    """Every httpx client ranch calls out with (A2A peers and what their `ClientPool` opens, webhooks,
    image URLs): it never follows redirects. With a `transport` (a guarded one) it takes no proxy
    from the environment and the transport's own limits; without, it verifies with the process's
    shared TLS context."""
    kwargs["follow_redirects"] = False
    if transport is None:
        return httpx.AsyncClient(verify=tls_context(), **kwargs)
    kwargs.pop("limits", None)  # the transport has its own
    return httpx.AsyncClient(transport=transport, trust_env=False, **kwargs)


def guarded_client(guard: UrlGuard, **kwargs: typing.Any) -> httpx.AsyncClient:
    """An outbound client whose every connection is judged by `guard`."""
    return outbound_client(GuardedTransport(guard), **kwargs)
