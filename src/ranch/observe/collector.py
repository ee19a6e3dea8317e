"""The collector's end of an OTLP/HTTP export: one kept-alive HTTP/1.1 connection, spoken with h11
over the event loop's own streams.

Why not httpx: posting a batch of 512 spans through `httpx.AsyncClient` cost the server about
500 µs of CPU (its pool, anyio and the instrumentation's wrapper around every request), some
2.7 µs per span under load, which was a sixth of what tracing cost a request. The same POST
through h11 (the HTTP/1.1 state machine httpx itself is built on) costs about a fifth of that
(`python -m bench.tracing post` measures both, side by side). What the exporter needs is small: a
POST, its status, keep-alive, TLS for an `https` collector, a time limit; no redirects, cookies,
proxies or pools. A connection that fails is dropped, and the next export opens a new one.
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.parse
from collections.abc import Mapping

import h11

MAX_ANSWER_BYTES = 1024 * 1024
"""Most of a collector's answer read (an `ExportTraceServiceResponse` is a few bytes)."""


class CollectorError(Exception):
    """The export did not get an HTTP answer: the connection failed, or the peer broke HTTP."""


class Collector:
    """POSTs to one OTLP/HTTP URL over a connection kept open between exports. One export at a time
    uses a connection: a second concurrent export opens its own (see `post`)."""

    def __init__(self, url: str, headers: Mapping[str, str], timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"OTLP endpoint {url!r}: not an http(s) URL")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = parts.scheme == "https"
        self.target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        authority = parts.netloc.rpartition("@")[2]  # never a URL's credentials in the Host header
        self.headers = [("Host", authority), *headers.items()]
        self.timeout = timeout
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, h11.Connection]] = []
        self._keeper: asyncio.Task[None] | None = None
        """Closes the kept connections when its loop stops (a loop cancels its tasks as it ends)."""

    async def post(self, body: bytes) -> int:
        """POST `body`; the answer's status code. A kept connection the collector closed meanwhile is
        retried once on a new one; any other failure raises `CollectorError` or `TimeoutError`."""
        async with asyncio.timeout(self.timeout):
            while self._idle:
                kept = self._idle.pop()
                try:
                    return await self._exchange(kept, body)
                except CollectorError:
                    continue  # the collector closed it while idle: a new connection is made below
            return await self._exchange(await self._open(), body)

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, h11.Connection]:
        context = ssl.create_default_context() if self.tls else None
        try:
            reader, writer = await asyncio.open_connection(self.host, self.port, ssl=context)
        except OSError as exc:
            raise CollectorError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        return reader, writer, h11.Connection(h11.CLIENT)

    async def _exchange(
        self, kept: tuple[asyncio.StreamReader, asyncio.StreamWriter, h11.Connection], body: bytes
    ) -> int:
        reader, writer, connection = kept
        try:
            headers = [*self.headers, ("Content-Length", str(len(body)))]
            writer.write(connection.send(h11.Request(method="POST", target=self.target, headers=headers)))
            writer.write(connection.send(h11.Data(data=body)))  # (no copy of the body: written as it is)
            writer.write(connection.send(h11.EndOfMessage()))
            await writer.drain()
            status, read = 0, 0
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    chunk = await reader.read(65536)
                    read += len(chunk)
                    if read > MAX_ANSWER_BYTES:
                        raise CollectorError(f"the collector's answer is over {MAX_ANSWER_BYTES} bytes")
                    connection.receive_data(chunk)  # b"": the peer closed, which h11 reports
                elif isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.EndOfMessage):
                    break
                elif isinstance(event, h11.ConnectionClosed):
                    raise CollectorError("the collector closed the connection before answering")
        except (OSError, h11.ProtocolError, CollectorError) as exc:
            writer.close()
            raise exc if isinstance(exc, CollectorError) else CollectorError(str(exc) or repr(exc)) from exc
        except BaseException:
            writer.close()  # cancelled or timed out mid-exchange: the connection's state is unknown
            raise
        if connection.our_state is h11.DONE and connection.their_state is h11.DONE:
            connection.start_next_cycle()
            self._idle.append(kept)
            if self._keeper is None or self._keeper.done():
                self._keeper = asyncio.get_running_loop().create_task(self._keep())
        else:
            writer.close()  # `Connection: close`, or an answer h11 cannot reuse the connection after
        return status

    async def _keep(self) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            self.close()

    def close(self) -> None:
        while self._idle:
            _, writer, _ = self._idle.pop()
            writer.close()
