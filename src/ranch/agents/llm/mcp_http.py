"""The mcp 2.x SDK's HTTP client (an `httpx2.AsyncClient`) sending through one of ranch's httpx clients.

The SDK takes only `httpx2` clients, while every outbound rule of ranch lives in its `httpx` clients
(`ClientPool.new_client`: a tenant's connections judged by the URL guard when each one is made, no
redirects, a bounded read per body and per stream event). `ViaHttpx` is an `httpx2` transport that
hands each request to such a client, so an MCP server is reached under the same rules as everything
else, and the guard stays in one place (policy/egress.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import httpx2


class ViaHttpx(httpx2.AsyncBaseTransport):
    """Send `httpx2` requests with an `httpx` client; its errors come back as their `httpx2` twins."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        outbound = httpx.Request(
            request.method,
            str(request.url),
            headers=request.headers.raw,
            content=await request.aread(),
            extensions={k: v for k, v in request.extensions.items() if k == "timeout"},
        )
        try:
            response = await self.client.send(outbound, stream=True)
        except httpx.HTTPError as exc:
            raise _twin(exc, request) from exc
        return httpx2.Response(
            response.status_code, headers=response.headers.raw, stream=_Body(response, request)
        )


class _Body(httpx2.AsyncByteStream):
    """The body of an `httpx` response, read as it arrives (an SSE stream stays a stream)."""

    def __init__(self, response: httpx.Response, request: httpx2.Request) -> None:
        self._response = response
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.aiter_raw():
                yield chunk
        except httpx.HTTPError as exc:
            raise _twin(exc, self._request) from exc

    async def aclose(self) -> None:
        await self._response.aclose()


def _twin(exc: httpx.HTTPError, request: httpx2.Request) -> httpx2.HTTPError:
    """The `httpx2` error of the same name (httpx2 is httpx's fork), keeping the message; the original
    stays its cause, so the guard's refusal is still found behind it (`policy.egress.refused`)."""
    kind = getattr(httpx2, type(exc).__name__, None)
    if not (isinstance(kind, type) and issubclass(kind, httpx2.TransportError)):
        kind = httpx2.ReadError if isinstance(exc, httpx.ReadError) else httpx2.TransportError
    return kind(str(exc) or type(exc).__name__, request=request)
