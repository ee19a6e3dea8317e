"""A lean OpenTelemetry tracer: the API's `TracerProvider`, `Tracer` and `Span`, recording every span
and exporting it over OTLP/HTTP, at a fraction of the SDK's cost.

Why: with the SDK, a span costs about 19 µs to make and 22 µs to encode, and one SendMessage makes
one span of about 60 µs of work; tracing everything took 0.41x the throughput (bench/README,
"Tracing"). Here a span is a slotted object that keeps its attributes in a plain dict, ends into a
list, and is encoded with its batch on the event loop by `observe.otlp` (bytes checked against the
SDK's encoder); a request's own span is leaner still (`RequestSpan`). Same API, so the call sites,
the httpx instrumentation and the a2a-sdk's own spans use it unchanged; what it leaves out is what
ranch does not use: samplers (every span is recorded, `OTEL_TRACES_SAMPLER` makes `tracing` choose
the SDK instead), span processors, links and limits beyond a bounded queue.

Configured by the standard variables: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (the full URL) or
`OTEL_EXPORTER_OTLP_ENDPOINT` (+ `/v1/traces`), `OTEL_EXPORTER_OTLP_HEADERS`,
`OTEL_EXPORTER_OTLP_TIMEOUT`, `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_BSP_MAX_QUEUE_SIZE`,
`OTEL_BSP_MAX_EXPORT_BATCH_SIZE`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import struct
import threading
import time
import traceback
import types
import urllib.parse
import urllib.request
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from typing import Any, NamedTuple

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import INVALID_SPAN_CONTEXT as INVALID
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState
from opentelemetry.trace.propagation import _SPAN_KEY
from opentelemetry.util._decorator import _agnosticcontextmanager
from opentelemetry.util.types import Attributes, AttributeValue

from ranch.observe import otlp
from ranch.observe.collector import Collector, CollectorError
from ranch.utils.backoff import Backoff

logger = logging.getLogger(__name__)

SAMPLED = TraceFlags(TraceFlags.SAMPLED)
UNSET = Status(StatusCode.UNSET)
NO_STATE = TraceState()
"""Shared by every span that has no status and no trace state yet: nothing made per span."""
SPAN_KEY = _SPAN_KEY
"""Where opentelemetry keeps the current span in a context (`trace.set_span_in_context`'s key)."""
Scope = tuple[str, str | None, str | None]
"""An instrumentation scope: (name, version, schema url)."""
EXPORTS = Backoff(attempts=3, first=0.5, jitter=False)
"""A batch is posted up to three times, 0.5 s then 1 s apart."""
MAX_ATTRIBUTES = 128
MAX_EVENTS = 128
"""A span's attributes and events past these are dropped (the SDK's default limits): with each value
`bounded`, a queued span's size is bounded whatever a caller sends."""


def bounded(value: Any) -> Any:
    """`value` as a span keeps it: a string cut to what is exported, a sequence as a tuple of at most
    MAX_ATTRIBUTES such items."""
    if type(value) is str:
        return value if len(value) <= otlp.MAX_VALUE_CHARS else value[: otlp.MAX_VALUE_CHARS]
    if isinstance(value, (list, tuple)):
        return tuple(bounded(item) for item in value[:MAX_ATTRIBUTES])
    return value


def bounded_all(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """At most MAX_ATTRIBUTES of `attributes`, each value `bounded`."""
    kept: dict[str, Any] = {}
    room = len(attributes) <= MAX_ATTRIBUTES
    for key, value in attributes.items():
        if not room and len(kept) >= MAX_ATTRIBUTES:
            break
        short = type(value) is not str or len(value) <= otlp.MAX_VALUE_CHARS  # (`bounded` inline)
        kept[key] = value if short and type(value) not in (list, tuple) else bounded(value)
    return kept


class LeanSpan(trace.Span):
    """A recording span: what the exporter needs, nothing more. Its ids are plain ints; the API's
    `SpanContext` is made only when something asks for it (a child span, a propagator): the span a
    request makes is read by nothing but the exporter, most of the time."""

    __slots__ = ("trace_id", "span_id", "_state", "_context", "_parent", "_exporter", "scope", "name",
                 "kind", "start", "end_time", "attributes", "events", "status")  # fmt: skip

    def __init__(
        self,
        name: str,
        trace_id: int,
        span_id: int,
        state: TraceState,
        parent: SpanContext | LeanSpan | None,
        kind: SpanKind,
        attributes: dict[str, AttributeValue],
        start: int,
        scope: Scope,
        exporter: BatchExporter,
    ) -> None:
        self.name = name
        self.trace_id = trace_id
        self.span_id = span_id
        self._state = state
        self._context: SpanContext | None = None
        self._parent = parent
        """The parent's context, or the parent itself when it is a span of this tracer."""
        self.kind = kind
        self.attributes = attributes
        self.start = start
        self.end_time: int | None = None
        self.events: list[tuple[str, int, Mapping[str, Any] | None]] | None = None
        self.status = UNSET
        self.scope = scope
        """The instrumentation scope (name, version, schema url) whose tracer made it."""
        self._exporter = exporter

    def get_span_context(self) -> SpanContext:
        context = self._context
        if context is None:
            context = self._context = SpanContext(self.trace_id, self.span_id, False, SAMPLED, self._state)
        return context

    @property
    def parent(self) -> SpanContext | None:
        parent = self._parent
        return parent.get_span_context() if isinstance(parent, LeanSpan) else parent

    def is_recording(self) -> bool:
        return self.end_time is None

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        attributes = self.attributes
        if self.end_time is None and (len(attributes) < MAX_ATTRIBUTES or key in attributes):
            short = type(value) is not str or len(value) <= otlp.MAX_VALUE_CHARS  # (`bounded` inline)
            attributes[key] = value if short and type(value) not in (list, tuple) else bounded(value)

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        for key, value in attributes.items():
            self.set_attribute(key, value)

    def add_event(self, name: str, attributes: Attributes = None, timestamp: int | None = None) -> None:
        if self.end_time is None:
            if self.events is None:
                self.events = []
            if len(self.events) < MAX_EVENTS:
                values = bounded_all(attributes) if attributes else None
                self.events.append((name, timestamp or time.time_ns(), values))

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
        if self.end_time is None:
            self.end_time = end_time or time.time_ns()
            self._exporter.add(self)

    def framed(self) -> bytes:
        """The span as its batch holds it (`otlp.framed`)."""
        return otlp.framed(self.encoded())

    def encoded(self) -> bytes:
        parent = self._parent
        status = self.status
        state = self._state
        # (`_value_`, the enums' own attribute: `.value` is a Python property; so are a trace state's
        # length and a status's fields, read only when the span has them)
        return otlp.span(
            self.trace_id.to_bytes(16, "big"),
            self.span_id,
            ""
            if state is NO_STATE or not state
            else ",".join(f"{key}={value}" for key, value in state.items()),
            None if parent is None else parent.span_id,
            parent is not None and not isinstance(parent, LeanSpan) and parent.is_remote,
            self.name,
            self.kind._value_,
            self.start,
            self.end_time or self.start,
            self.attributes,
            self.events,
            0 if status is UNSET else status.status_code._value_,
            None if status is UNSET else status.description,
        )


_NO_VALUES: Mapping[str, Any] = types.MappingProxyType({})
"""A request span's attributes until something sets one: nothing made per request."""

REQUEST_SPAN: ContextVar[RequestSpan | None] = ContextVar("ranch_request_span", default=None)
"""The request's span, made current without a context built for it (`tracing.enter`): spans started
with no parent while OpenTelemetry's context holds no span are its children."""

Describe = Callable[[Any, Any], tuple[str, dict[str, Any]]]
"""What a `RequestSpan`'s owner reads off its request, when the span is encoded: (name, attributes)."""


class RequestSpan(LeanSpan):
    """The SERVER span of a request that came with no trace of its own, made with as little as a
    request can pay: its ids (the trace id the request already has, in hex), its start, and the
    request it describes. Its name and attributes are read off `subject` (with the `outcome` its
    owner sets as it ends) by `describe` when it is encoded, off the request's path; a `describe`
    that answers equal requests with the same tuple gets that tuple's bytes encoded once.

    Why: building the attributes, the name and the parent's lookup cost a request about 3 µs of its
    ~20 in process (the code and data cold in the CPU's caches each time), most of what tracing
    cost it (bench/README, "Tracing")."""

    __slots__ = ("trace_hex", "outcome", "_subject", "_describe")
    # What every request's span starts with, as class attributes rather than ten writes per request
    # (a span has an instance dict besides its slots: what is set later on one span goes there).
    # Each object a queued span holds is one more for the garbage collector's youngest generation
    # to count and scan until its batch goes: the span holds its request and its outcome, no more.
    kind = SpanKind.SERVER
    name = ""  # (`describe` names it; `update_name` may still)
    attributes: dict[str, AttributeValue] = _NO_VALUES  # type: ignore[assignment]  # (a dict once set)
    events = None
    status = UNSET
    _context = None
    _state = NO_STATE
    _parent = None

    def __init__(
        self, trace_hex: str, subject: Any, describe: Describe, scope: Scope, exporter: BatchExporter
    ) -> None:
        self.trace_hex = trace_hex
        self.span_id = _random_bits(64) or 1  # (`_span_id`, without its call)
        self.start = time.time_ns()
        self.end_time = None
        self.outcome = None
        self._subject = subject
        self._describe = describe
        self.scope = scope
        self._exporter = exporter

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if self.attributes is _NO_VALUES:
            self.attributes = {}  # what others set on it: added to what `describe` reads
        super().set_attribute(key, value)

    def answered(self, outcome: Any) -> None:
        """End the span with its request's `outcome` (what `describe` reads with the request)."""
        if self.end_time is not None:
            return
        self.end_time = time.time_ns()
        self.outcome = outcome
        self._exporter.add(self)

    def plain(self) -> bool:
        """Nothing but `describe` says what it is: it is encoded from its description's bytes."""
        return (
            self.attributes is _NO_VALUES and self.events is None and not self.name and self.status is UNSET
        )

    @property
    def trace_id(self) -> int:  # type: ignore[override]  # (a child, or a propagator, asks for it: rare next to the requests)
        return int(self.trace_hex, 16)

    def framed(self) -> bytes:
        if not self.plain():
            return super().framed()
        described = _encoded(self._describe(self._subject, self.outcome))
        return otlp.framed_span(
            described, self.trace_hex, self.span_id, self.start, self.end_time or self.start
        )

    def encoded(self) -> bytes:
        if self.plain():
            return otlp.unframed(self.framed())
        name, attributes = self._describe(self._subject, self.outcome)  # something was set on it
        self.name = self.name or name
        self.attributes = {**attributes, **self.attributes}
        return super().encoded()


def _encoded(described: tuple[str, dict[str, Any]]) -> otlp.Described:
    """A `describe` answer, encoded once (kept by the answer's identity)."""
    kept = _described.get(id(described))
    if kept is None or kept[0] is not described:  # (the tuple is held: its id is not reused meanwhile)
        if len(_described) >= otlp.KEPT_ATTRIBUTES:
            _described.clear()
        name, attributes = described
        kept = _described[id(described)] = (
            described,
            otlp.Described(name, SpanKind.SERVER.value, attributes),
        )
    return kept[1]


_described: dict[int, tuple[tuple[str, dict[str, Any]], otlp.Described]] = {}
"""A `describe` answer's encoded name, kind and attributes, by the answer's identity."""
_UNENCODABLE = (TypeError, ValueError, OverflowError, UnicodeError, struct.error)
"""What encoding a value OTLP cannot carry raises: that span is dropped, never its batch."""


class LeanTracer(trace.Tracer):
    def __init__(self, scope: Scope, exporter: BatchExporter) -> None:
        self.scope = scope
        self.exporter = exporter

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
        values = bounded_all(attributes) if attributes else {}
        return self.start_owned(name, context, kind, values, start_time)

    def start_owned(
        self,
        name: str,
        parent: trace.Span | Context | None,
        kind: SpanKind,
        attributes: dict[str, AttributeValue],
        start_time: int | None = None,
    ) -> trace.Span:
        """`start_span` under `parent` (a span, a context, or None for the current span), keeping
        `attributes` (a dict the caller made for this span, its values within `bounded`'s limits)
        rather than a copy."""
        if parent is None:
            current = otel_context.get_current().get(SPAN_KEY) or REQUEST_SPAN.get()
        elif isinstance(parent, dict):  # a Context is a dict
            current = parent.get(SPAN_KEY)
        else:
            current = parent
        parent_span: SpanContext | LeanSpan | None
        if isinstance(current, LeanSpan):  # a span of this process: no context to make or read
            trace_id, state, parent_span = current.trace_id, current._state, current
        else:
            context: SpanContext = current.get_span_context() if isinstance(current, trace.Span) else INVALID
            if not context.is_valid:
                trace_id, state, parent_span = _trace_id(), NO_STATE, None  # a new trace
            elif not context.trace_flags.sampled:
                return trace.NonRecordingSpan(context)  # the caller chose not to sample this trace: follow it
            else:
                trace_id, state, parent_span = context.trace_id, context.trace_state, context
        return LeanSpan(name, trace_id, _span_id(), state, parent_span, kind, attributes,
                        start_time or time.time_ns(), self.scope, self.exporter)  # fmt: skip

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
    return _random_bits(64) or 1


_random_bits = random.getrandbits


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


class _Timer(NamedTuple):
    """The exporter's pending send and the loop it is set on."""

    handle: asyncio.TimerHandle
    loop: asyncio.AbstractEventLoop


class BatchExporter:
    """Ended spans, queued (bounded in count, each span's values by `bounded`), encoded and sent in
    batches from the event loop they ended on.

    `add` is all a request pays: a list append (the first of a batch also sets a timer). The loop
    encodes and sends a batch `delay` seconds later or as soon as one is full, over a connection
    kept to the collector (`observe.collector`; not httpx, so the export is not traced), at most
    MAX_IN_FLIGHT batches at a time: a slow or absent collector leaves spans in the queue, where
    the queue's bound drops (and counts) what does not fit, and the warnings say so at most once a
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
    ) -> None:
        self.url = url
        self.resource = dict(resource)
        self.headers = {"Content-Type": "application/x-protobuf", **(headers or {})}
        self.timeout = timeout
        self.delay = delay
        self.max_queue = max_queue
        self.max_batch = max_batch
        self.room = min(max_queue, max_batch) - 1
        """Queued spans below which one more needs no timer set and drops nothing (`add`'s quick case)."""
        self.dropped = 0
        """Spans not exported: the queue was full, a span could not be encoded, or its batch was lost."""
        self.exported = 0
        self._queue: list[LeanSpan] = []
        """Ended spans, encoded when their batch is taken: one tight loop of encoding is cheaper than
        the same work spread over the requests, whose code it would push out of the CPU's caches."""
        self._take_lock = threading.Lock()
        """`flush` (any thread) and the loop may take batches at once: each span goes out once."""
        self._timer: _Timer | None = None
        self._now = False
        """The timer set is for a batch due now (a full one): more spans need not set it again."""
        self._sending: set[asyncio.Task[None]] = set()
        self._collectors: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Collector] = (
            weakref.WeakKeyDictionary()
        )
        """The connection kept to the collector, per event loop (a loop's streams are its own)."""
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
        queue, timer = self._queue, self._timer
        if len(queue) < self.room and timer is not None and timer.loop is asyncio._get_running_loop():
            queue.append(span)  # the usual case: a timer set on this loop, room left in the batch
            return
        if len(queue) >= self.max_queue:
            self.dropped += 1
            return
        queue.append(span)
        if len(queue) >= self.max_batch:
            due = self._now and timer is not None and not timer.loop.is_closed()
            if not due and len(self._sending) < self.MAX_IN_FLIGHT:
                self._send_soon(0.0)  # (else a batch is due already, or `_sent` sends one)
        elif timer is None or timer.loop.is_closed():
            self._send_soon(self.delay)  # (a timer on a loop that closed would never fire)

    def _send_soon(self, delay: float) -> None:
        loop = _running_loop()
        if loop is None:
            return  # no loop here: `flush`, or the next batch on a loop, sends these
        timer = self._timer
        if timer is not None and timer.loop is loop and not loop.is_closed():
            if delay > 0 or self._now:
                return
            timer.handle.cancel()
        self._timer = _Timer(loop.call_later(delay, self._send_batches, loop), loop)
        self._now = delay <= 0

    def _send_batches(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer, self._now = None, False
        while self._queue and len(self._sending) < self.MAX_IN_FLIGHT:
            body, count = self._take()
            if not count:
                continue  # (every span of that batch was dropped)
            task = loop.create_task(self._post(loop, body, count))
            self._sending.add(task)
            task.add_done_callback(self._sent)
        if self._queue:  # what is left goes once a batch in flight is done, or after `delay`
            self._send_soon(self.delay)

    def _sent(self, task: asyncio.Task[None]) -> None:
        self._sending.discard(task)
        if len(self._queue) >= self.max_batch:
            self._send_soon(0.0)

    def _take(self) -> tuple[bytes, int]:
        """The next batch as one export request, and how many spans it holds."""
        with self._take_lock:
            queue = self._queue
            batch = queue[: self.max_batch]
            del queue[: self.max_batch]  # a span another thread appends meanwhile stays, at the end
        scopes: dict[Scope, list[bytes]] = {}
        count = 0
        for span in batch:
            try:
                encoded = span.framed()
            except _UNENCODABLE as exc:
                self.unencodable(exc)
                continue
            scopes.setdefault(span.scope, []).append(encoded)
            count += 1
        return otlp.request(self.resource, scopes), count

    def unencodable(self, error: Exception) -> None:
        """A span held a value OTLP cannot carry: it is dropped (never its batch), and counted."""
        self.dropped += 1
        self._warn("traces: a span could not be encoded and was dropped: %s", error)

    async def _post(self, loop: asyncio.AbstractEventLoop, body: bytes, count: int) -> None:
        collector = self._collectors.get(loop)
        if collector is None:
            collector = self._collectors[loop] = Collector(self.url, self.headers, self.timeout)
        for attempt in range(3):
            try:
                status = await collector.post(body)
            except (CollectorError, TimeoutError) as exc:
                if attempt == 2:
                    self._lost(count, f"{type(exc).__name__}: {exc}")
                    return
            else:
                if status < 300:
                    self.exported += count
                    return
                if status not in (429, 502, 503, 504):
                    self._lost(count, f"HTTP {status}")
                    return
            await asyncio.sleep(EXPORTS.base(attempt))
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
                continue  # (every span of that batch was dropped)
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
            self._timer.handle.cancel()
            self._timer, self._now = None, False
        self.flush(self.timeout)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
