"""OpenTelemetry traces: off unless an exporter is configured, and then a span per request, turn,
hop and outbound call.

ranch is configured the standard way, by the `OTEL_*` environment variables
(docs/observability.md): `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
(OTLP over HTTP), or `OTEL_TRACES_EXPORTER=otlp|console`; `OTEL_SDK_DISABLED=true` wins over
both. `from_environment` then installs a `TracerProvider` with a batch processor (spans leave
the process off the request's path), the W3C `traceparent`/`tracestate` propagation, and the
httpx instrumentation, so every outbound call (remote members, MCP servers over HTTP, model
providers, push webhooks) is a client span that carries the trace.

With tracing off, `tracer()` is None and every call site skips its span on one `is None`
check: nothing is built, nothing is looked up.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any

import httpx
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ranch._version import __version__
from ranch.observe.lean import (
    REQUEST_SPAN,
    SPAN_KEY,
    BatchExporter,
    Describe,
    LeanSpan,
    LeanTracer,
    LeanTracerProvider,
    RequestSpan,
    bounded_all,
)
from ranch.observe.otlp import MAX_VALUE_CHARS

logger = logging.getLogger(__name__)

SERVICE_NAME = "ranch"
"""The `service.name` spans carry unless `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` say otherwise."""
_PROPAGATOR = TraceContextTextMapPropagator()
__all__ = ["MAX_VALUE_CHARS"]  # (the longest string value a span exports: call sites cut theirs to it)
_tracer: Tracer | None = None
_installed = False
_trace_url: str | None = None


def set_trace_url(template: str | None) -> None:
    """`--trace-url`: a template with `{trace_id}` (a Jaeger or Tempo URL) the web page links turns to."""
    global _trace_url
    _trace_url = template


def link(trace_id: str) -> str | None:
    """The trace's page in the operator's trace viewer, when `--trace-url` names one."""
    return _trace_url.replace("{trace_id}", trace_id) if _trace_url and trace_id else None


def tracer() -> Tracer | None:
    """ranch's tracer, or None while tracing is off (call sites then build nothing)."""
    return _tracer


def enable(provider: trace.TracerProvider) -> None:
    """Trace with `provider` from now on (`from_environment` does this; tests pass their own)."""
    global _tracer
    _tracer = provider.get_tracer("ranch", __version__)


def disable() -> None:
    global _tracer
    _tracer = None


def configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for traces to be exported."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
    return bool(endpoint) or exporter in ("otlp", "console")


def from_environment() -> bool:
    """Install tracing as the `OTEL_*` variables ask, once per process; True when it is on.

    OTLP export goes through ranch's lean tracer (`observe.lean`, a fraction of the SDK's cost per
    span); the console exporter, a configured sampler (`OTEL_TRACES_SAMPLER`) or `RANCH_TRACER=sdk`
    get the OpenTelemetry SDK's own provider.
    """
    global _installed
    if _installed or not configured():
        return _tracer is not None
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.sdk.resources import Resource

    env = os.environ
    named = env.get("OTEL_SERVICE_NAME") or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    resource = Resource.create({} if named else {"service.name": SERVICE_NAME})  # the OTEL_* name wins
    console = env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console"
    provider: trace.TracerProvider
    if console or env.get("OTEL_TRACES_SAMPLER") or env.get("RANCH_TRACER", "").lower() == "sdk":
        provider = _sdk_provider(resource, console)
    else:
        provider = LeanTracerProvider(BatchExporter.from_environment(dict(resource.attributes)))
    trace.set_tracer_provider(provider)
    HTTPXClientInstrumentor().instrument(
        tracer_provider=provider, request_hook=_no_query, async_request_hook=_no_query_async
    )
    enable(provider)
    _installed = True
    logger.info("tracing on: spans are exported by %s", type(provider).__name__)
    return True


def _no_query(span: Span, request: Any) -> None:
    """An outbound call's URL without its query: a member's or webhook's URL may carry `?token=`."""
    url = request.url
    if isinstance(url, httpx.URL) and url.query:
        bare = str(url.copy_with(query=None))
        span.set_attribute("url.full", bare)
        span.set_attribute("http.url", bare)


async def _no_query_async(span: Span, request: Any) -> None:
    _no_query(span, request)


def _sdk_provider(resource: Any, console: bool) -> trace.TracerProvider:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    exporter: SpanExporter
    if console:
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()  # endpoint, headers, timeout: from the OTEL_EXPORTER_OTLP_* variables
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def flush() -> None:
    """Export the spans still buffered (as the server stops; the provider also does at exit)."""
    provider = trace.get_tracer_provider()
    force_flush = getattr(provider, "force_flush", None)
    if _installed and force_flush is not None:
        force_flush(5000)


# -- helpers for the call sites -------------------------------------------------------------------


def incoming(headers: Iterable[tuple[bytes, bytes]]) -> Context | None:
    """The caller's trace context from a request's `traceparent` / `tracestate`, else None."""
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name == b"traceparent" or name == b"tracestate":
            carrier[name.decode()] = value.decode("latin-1")
    if "traceparent" not in carrier:
        return None
    return _PROPAGATOR.extract(carrier)


def traceparent() -> str | None:
    """The W3C `traceparent` of the current span, to store with work that another task or replica
    picks up later; None when there is none."""
    current = current_span()
    if not current.get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, trace.set_span_in_context(current))
    return carrier.get("traceparent")


def resumed(parent: str | None) -> Context | None:
    """The context a stored `traceparent` names (see `traceparent`), else None."""
    return _PROPAGATOR.extract({"traceparent": parent}) if parent else None


def request_span(trace_hex: str, subject: Any, describe: Describe) -> Span | None:
    """A new trace's SERVER span (trace id `trace_hex`, 32 hex digits) for a request that came with no
    `traceparent`, when the lean tracer can make it cheaply (`lean.RequestSpan`:
    `describe(subject, span.outcome)` names it and gives its attributes when it is exported); None
    when tracing is off or another tracer is in use."""
    active = _tracer
    if type(active) is LeanTracer:
        return RequestSpan(trace_hex, subject, describe, active.scope, active.exporter)
    return None


def trace_id_of(span: Span) -> str:
    if type(span) is RequestSpan:
        return span.trace_hex
    if isinstance(span, LeanSpan):
        return "%032x" % span.trace_id  # noqa: UP031 (the fastest of Python's ways to write it)
    return "%032x" % span.get_span_context().trace_id  # noqa: UP031


def start(name: str, attributes: dict[str, Any] | None = None, *, parent: Span | Context | None = None,
          kind: SpanKind = SpanKind.INTERNAL, bounded: bool = False) -> Span | None:  # fmt: skip
    """A span under `parent` (a span, a context, or the current span), or None while tracing is off.
    `attributes` are a dict made for this span; `bounded`: its values are already within
    `lean.bounded`'s limits, so the lean tracer keeps the dict as it is (a request's span)."""
    active = _tracer
    if active is None:
        return None
    if type(active) is LeanTracer:
        values = attributes if bounded and attributes is not None else bounded_all(attributes or {})
        return active.start_owned(name, parent, kind, values)
    # a Context is a dict: that check is cheap, where one against the abstract Span is not
    context = parent if parent is None or isinstance(parent, dict) else trace.set_span_in_context(parent)
    return active.start_span(name, context=context, kind=kind, attributes=attributes)


def attach(span: Span) -> object:
    """Make `span` current until `detach` with the token this returns (no context manager)."""
    current = _CURRENT
    if current is not None:  # opentelemetry's own variable, without the two calls around it
        base = current.get()
        return current.set(Context({**base, SPAN_KEY: span} if base else {SPAN_KEY: span}))
    return otel_context.attach(Context({**otel_context.get_current(), SPAN_KEY: span}))


def enter(span: Span) -> object:
    """Make a request's span current for the request, until `detach` with the token this returns.

    The lean tracer's request span goes in `REQUEST_SPAN` when nothing is current in
    OpenTelemetry's context (a server's request, always): no context is built for it, and spans
    started without a parent while no other span is current take it as theirs (`LeanTracer`), as
    outbound calls and `traceparent` do. Any other span, or a request served inside a span (an
    in-process call), is attached to OpenTelemetry's context."""
    current = _CURRENT
    if type(span) is RequestSpan and current is not None and not current.get():
        return REQUEST_SPAN.set(span)
    return attach(span)


def detach(token: object) -> None:
    """Undo the `attach` or `enter` that returned `token`."""
    if type(token) is Token and (token.var is _CURRENT or token.var is REQUEST_SPAN):
        token.var.reset(token)
    else:
        otel_context.detach(token)  # type: ignore[arg-type]  # (another runtime context's token)


def current_span() -> Span:
    """The span current here: OpenTelemetry's, else the request's (`enter`); INVALID_SPAN if none."""
    current = trace.get_current_span()
    if current.get_span_context().is_valid:
        return current
    return REQUEST_SPAN.get() or current


def _current_variable() -> ContextVar[Context] | None:
    """The context variable opentelemetry keeps the current context in, when its runtime context is
    the standard one (`OTEL_PYTHON_CONTEXT` may name another: then its API is used)."""
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    if type(runtime) is ContextVarsRuntimeContext:
        variable = getattr(runtime, "_current_context", None)
        if isinstance(variable, ContextVar):
            return variable
    return None


_CURRENT = _current_variable()


@contextmanager
def current(span: Span | None) -> Iterator[None]:
    """Make `span` the current one for the block (outbound calls made in it become its children)."""
    if span is None:
        yield
        return
    token = attach(span)
    try:
        yield
    finally:
        detach(token)


def failed(span: Span | None, error: BaseException) -> None:
    """Mark `span` failed with `error`'s type (the `error.type` attribute) and message."""
    if span is None:
        return
    span.set_attribute("error.type", type(error).__name__)
    span.set_status(Status(StatusCode.ERROR, str(error)[:500]))
