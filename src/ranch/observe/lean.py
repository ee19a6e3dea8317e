"""A lean OpenTelemetry tracer: the API's `TracerProvider`, `Tracer` and `Span`, recording every span
and exporting it over OTLP/HTTP, at a fraction of the SDK's cost.

Why: with the SDK, a span costs about 19 µs to make and 22 µs to encode, and one SendMessage makes
one span of about 60 µs of work; tracing everything took 0.41x the throughput (bench/README,
"Tracing"). Here a span is a slotted object that keeps its attributes in a plain dict, ends into a
list, and is encoded in a background thread by `observe.otlp` (bytes checked against the SDK's
encoder). Same API, so the call sites, the httpx instrumentation and the a2a-sdk's own spans use
it unchanged; what it leaves out is what ranch does not use: samplers (every span is recorded,
`OTEL_TRACES_SAMPLER` makes `tracing` choose the SDK instead), span processors, links and limits
beyond a bounded queue.

Configured by the standard variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or
`OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/traces`), `OTEL_EXPORTER_OTLP_HEADERS`,
`OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_QUEUE_SIZE`,
`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import random
import struct
import threading
import time
import traceback
import urllib.parse
import urllib.request
import weakref
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import httpx
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, Context
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState
from opentelemetry.util._decorator import _agnosticcontextmanager
from opentelemetry.util.types import Attributes, AttributeValue

from ranch.observe import otlp

logger = logging.getLogger(__name__)

SAMPLED = TraceFlags(TraceFlags.SAMPLED)
UNSET = Status(StatusCode.UNSET)
NO_STATE = TraceState()
"""Shared by every span that has no status and no trace state yet: nothing made per span."""
Scope = tuple[str, str | None, str | None]
"""An instrumentation scope: (name, version, schema url)."""


class LeanSpan(trace.Span):
    """A recording span: what the exporter needs, nothing more."""

    __slots__ = ("_context", "_parent", "_exporter", "_scope", "name", "kind", "start", "end_time",
                 "attributes", "events", "status")  # fmt: skip

    def __init__(
        self,
        name: str,
        context: SpanContext,
        parent: SpanContext | None,
        kind: SpanKind,
        attributes: Attributes,
        start: int,
        scope: Scope,
        exporter: BatchExporter,
    ) -> None:
        self.name = name
        self._context = context
        self._parent = parent
        self.kind = kind
        self.attributes: dict[str, AttributeValue] = dict(attributes) if attributes else {}
        self.start = start
        self.end_time: int | None = None
        self.events: list[tuple[str, int, Mapping[str, Any] | None]] | None = None
        self.status = UNSET
        self._scope = scope
        self._exporter = exporter

    def get_span_context(self) -> SpanContext:
        return self._context

    @property
    def parent(self) -> SpanContext | None:
        return self._parent

    def is_recording(self) -> bool:
        return self.end_time is None

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if self.end_time is None:
            self.attributes[key] = tuple(value) if isinstance(value, list) else value

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def add_event(self, name: str, attributes: Attributes = None, timestamp: int | None = None) -> None:
        if self.end_time is None:
            if self.events is None:
                self.events = []
            self.events.append((name, timestamp or time.time_ns(), dict(attributes) if attributes else None))

    def add_link(self, context: SpanContext, attributes: Attributes = None) -> None:
        return  # links are not exported by this tracer

    def update_name(self, name: str) -> None:
        if self.end_time is None:
            self.name = name

    def set_status(self, status: Status | StatusCode, description: str | None = None) -> None:
        if self.end_time is not None or self.status.status_code is StatusCode.OK:
            return  # OK is final, as in the SDK
        self.status = status if isinstance(status, Status) else Status(status, description)

    def record_exception(
        self,
        exception: BaseException,
        attributes: Attributes = None,
        timestamp: int | None = None,
        escaped: bool = False,
    ) -> None:
        stack = "".join(traceback.format_exception(type(exception), exception, exception.__traceback__))
        values: dict[str, Any] = {
            "exception.type": type(exception).__name__,
            "exception.message": str(exception),
            "exception.stacktrace": stack,
            "exception.escaped": str(escaped),
        }
        values.update(attributes or {})
        self.add_event("exception", values, timestamp)

    def end(self, end_time: int | None = None) -> None:
        if self.end_time is not None:
            return
        self.end_time = end_time or time.time_ns()
        self._exporter.add(self)

    def encoded(self) -> bytes:
        parent = self._parent
        context = self._context
        status = self.status
        return otlp.span(
            trace_id=context.trace_id,
            span_id=context.span_id,
            trace_state=",".join(f"{key}={value}" for key, value in context.trace_state.items()),
            parent_id=parent.span_id if parent is not None else None,
            parent_remote=parent is not None and parent.is_remote,
            name=self.name,
            kind=self.kind.value,
            start=self.start,
            end=self.end_time or self.start,
            values=self.attributes,
            events=self.events or (),
            status_code=status.status_code.value,
            status_message=status.description,
        )

    @property
    def scope(self) -> Scope:
        return self._scope


class LeanTracer(trace.Tracer):
    def __init__(self, scope: Scope, exporter: BatchExporter) -> None:
        self._scope = scope
        self._exporter = exporter

    def start_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
    ) -> trace.Span:
        current = trace.get_current_span(context).get_span_context()
        parent: SpanContext | None = current if current.is_valid else None
        if parent is not None and not parent.trace_flags.sampled:
            return trace.NonRecordingSpan(parent)  # the caller chose not to sample this trace: follow it
        if parent is not None:
            ids = SpanContext(parent.trace_id, _span_id(), False, SAMPLED, parent.trace_state)
        else:
            ids = SpanContext(_trace_id(), _span_id(), False, SAMPLED, NO_STATE)
        start = start_time or time.time_ns()
        return LeanSpan(name, ids, parent, kind, attributes, start, self._scope, self._exporter)

    @_agnosticcontextmanager
    def start_as_current_span(
        self,
        name: str,
        context: Context | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
        start_time: int | None = None,
        record_exception: bool = True,
        set_status_on_exception: bool = True,
        end_on_exit: bool = True,
    ) -> Iterator[trace.Span]:
        span = self.start_span(name, context, kind, attributes, links, start_time)
        with trace.use_span(span, end_on_exit, record_exception, set_status_on_exception) as current:
            yield current


def _trace_id() -> int:
    return random.getrandbits(128) or 1


def _span_id() -> int:
    return random.getrandbits(64) or 1


class LeanTracerProvider(trace.TracerProvider):
    """Tracers whose spans `exporter` sends; `resource` is the `service.name` and the rest."""

    def __init__(self, exporter: BatchExporter) -> None:
        self.exporter = exporter

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Attributes = None,
    ) -> trace.Tracer:
        return LeanTracer(
            (instrumenting_module_name, instrumenting_library_version, schema_url), self.exporter
        )

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.exporter.flush(timeout_millis / 1000)

    def shutdown(self) -> None:
        self.exporter.shutdown()


class BatchExporter:
    """Ended spans, queued as encoded bytes (bounded in count and bytes), sent in batches from the
    event loop they ended on.

    `add` is all a request pays: encoding and a list append (the first of a batch also sets a
    timer). The loop sends a batch `delay` seconds later or as soon as one is full, with an httpx
    client whose own instrumentation is suppressed (the export is not traced), at most
    MAX_IN_FLIGHT batches at a time: a slow or absent collector leaves spans in the queue, where
    the queue's bounds drop (and count) what does not fit, and the warnings say so at most once a
    minute. No export thread: a second thread on a server's core cost more in GIL hand-overs than
    the encoding itself (bench/README, "Tracing"). Spans that end with no running loop (start-up,
    shutdown, other threads) are sent by `flush`, or with the next batch.
    """

    MAX_IN_FLIGHT = 2

    def __init__(
        self,
        url: str,
        resource: Mapping[str, Any],
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        delay: float = 5.0,
        max_queue: int = 2048,
        max_batch: int = 512,
        max_queue_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        self.url = url
        self.resource = dict(resource)
        self.headers = {"Content-Type": "application/x-protobuf", **(headers or {})}
        self.timeout = timeout
        self.delay = delay
        self.max_queue = max_queue
        self.max_batch = max_batch
        self.max_queue_bytes = max_queue_bytes
        self.dropped = 0
        """Spans not exported: the queue was full, or a span could not be encoded."""
        self.exported = 0
        self._queue: list[tuple[Scope, bytes]] = []
        """Spans encoded as they ended: only bytes wait for the batch (no objects for the GC to walk)."""
        self._queued_bytes = 0
        self._take_lock = threading.Lock()
        """`flush` (any thread) and the loop may take batches at once: each span goes out once."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._sending: set[asyncio.Task[None]] = set()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = (
            weakref.WeakKeyDictionary()
        )
        self._warned = 0.0

    @classmethod
    def from_environment(
        cls, resource: Mapping[str, Any], environ: Mapping[str, str] | None = None
    ) -> BatchExporter:
        env = os.environ if environ is None else environ
        url = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or (
            env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318").rstrip("/") + "/v1/traces"
        )
        headers = {}
        listed = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS", env.get("OTEL_EXPORTER_OTLP_HEADERS", ""))
        for pair in listed.split(","):
            name, _, value = pair.partition("=")
            if name.strip():
                headers[urllib.parse.unquote(name.strip())] = urllib.parse.unquote(value.strip())
        return cls(
            url,
            resource,
            headers=headers,
            timeout=float(env.get("OTEL_EXPORTER_OTLP_TIMEOUT", "10000")) / 1000,
            delay=float(env.get("OTEL_BSP_SCHEDULE_DELAY", "5000")) / 1000,
            max_queue=int(env.get("OTEL_BSP_MAX_QUEUE_SIZE", "2048")),
            max_batch=int(env.get("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "512")),
        )

    def add(self, span: LeanSpan) -> None:
        queue = self._queue
        if len(queue) >= self.max_queue or self._queued_bytes >= self.max_queue_bytes:
            self.dropped += 1
            return
        try:
            encoded = span.encoded()
        except (TypeError, ValueError, OverflowError, UnicodeError, struct.error) as exc:
            self.dropped += 1  # a value OTLP cannot carry: the span is dropped, never the caller's work
            self._warn("traces: a span could not be encoded and was dropped: %s", exc)
            return
        queue.append((span.scope, encoded))
        self._queued_bytes += len(encoded)
        if len(queue) >= self.max_batch:
            self._send_soon(0.0)
        elif self._timer is None or self._timer_loop is None or self._timer_loop.is_closed():
            self._send_soon(self.delay)  # (a timer on a loop that closed would never fire)

    def _send_soon(self, delay: float) -> None:
        loop = _running_loop()
        if loop is None:
            return  # no loop here: `flush`, or the next batch on a loop, sends these
        if self._timer is not None and self._timer_loop is loop and not loop.is_closed():
            if delay > 0:
                return
            self._timer.cancel()
        self._timer, self._timer_loop = loop.call_later(delay, self._send_batches, loop), loop

    def _send_batches(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = self._timer_loop = None
        while self._queue and len(self._sending) < self.MAX_IN_FLIGHT:
            body, count = self._take()
            if not count:
                break
            task = loop.create_task(self._post(loop, body, count), context=_unobserved())
            self._sending.add(task)
            task.add_done_callback(self._sent)
        if self._queue:  # what is left goes once a batch in flight is done, or after `delay`
            self._send_soon(self.delay)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        if len(self._queue) >= self.max_batch:
            self._send_soon(0.0)

    def _take(self) -> tuple[bytes, int]:
        with self._take_lock:
            queue = self._queue
            batch = queue[: self.max_batch]
            del queue[: self.max_batch]  # a span another thread appends meanwhile stays, at the end
            self._queued_bytes -= sum(len(encoded) for _, encoded in batch)
        scopes: dict[Scope, list[bytes]] = {}
        for scope, encoded in batch:
            scopes.setdefault(scope, []).append(encoded)
        return otlp.request(self.resource, scopes), len(batch)

    async def _post(self, loop: asyncio.AbstractEventLoop, body: bytes, count: int) -> None:
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = httpx.AsyncClient(timeout=self.timeout, trust_env=False)
        for attempt in range(3):
            try:
                answer = await client.post(self.url, content=body, headers=self.headers)
            except httpx.HTTPError as exc:
                if attempt == 2:
                    self._lost(count, f"{type(exc).__name__}: {exc}")
                    return
            else:
                if answer.status_code < 300:
                    self.exported += count
                    return
                if answer.status_code not in (429, 502, 503, 504):
                    self._lost(count, f"HTTP {answer.status_code}")
                    return
            await asyncio.sleep(0.5 * 2**attempt)
        self._lost(count, "3 attempts failed")

    def _lost(self, count: int, why: str) -> None:
        self.dropped += count
        self._warn("traces: %d span(s) not exported (%s); %d dropped so far", count, why, self.dropped)

    def _warn(self, message: str, *args: object) -> None:
        now = time.monotonic()
        if now - self._warned >= 60 or not self._warned:
            self._warned = now
            logger.warning(message, *args)

    def flush(self, timeout: float = 30.0) -> bool:
        """Send every queued span now, from any thread, without a loop; True once all were sent.
        (Batches the loop has in flight are its own.)"""
        opener = urllib.request.build_opener(
            urllib.request.ProxyHandler({})
        )  # no proxy, as the loop's client
        while self._queue:
            body, count = self._take()
            if not count:
                break
            request = urllib.request.Request(self.url, data=body, headers=self.headers, method="POST")
            try:
                with opener.open(request, timeout=min(timeout, self.timeout)) as answer:
                    answer.read()
            except OSError as exc:
                self._lost(count, str(exc))
                return False
            self.exported += count
        return True

    def shutdown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = self._timer_loop = None
        self.flush(self.timeout)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _unobserved() -> contextvars.Context:
    """A context in which outbound calls make no spans: the export of spans is not itself traced."""
    context = contextvars.copy_context()
    context.run(_suppress)
    return context


def _suppress() -> None:
    otel_context.attach(otel_context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True))
