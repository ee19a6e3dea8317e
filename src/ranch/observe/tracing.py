"""OpenTelemetry traces: off unless an exporter is configured, and then a span per request, turn,
hop and outbound call.

ranch traces through the OpenTelemetry SDK, configured the standard way by the `OTEL_*` environment
variables (docs/observability.md): `OTEL_EXPORTER_OTLP_ENDPOINT` or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, or `OTEL_TRACES_EXPORTER=otlp|console`; `OTEL_SDK_DISABLED=true`
wins over both. `from_environment` then installs the SDK's `TracerProvider` (its sampler from
`OTEL_TRACES_SAMPLER`), a `BatchSpanProcessor` (spans leave the process off the request's path) and
the OTLP exporter `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` names (`http/protobuf` or `grpc`), which
read their own endpoint, headers, compression, timeout and certificates. It also instruments httpx,
so every outbound call (remote members, MCP servers over HTTP, model providers, push webhooks) is a
client span that carries the trace. `exporting()`, entered by the hub's lifespan, flushes what is
left as the server stops.

With tracing off, `tracer()` is None and every call site skips its span on one `is None`
check: nothing is built, nothing is looked up.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import httpx
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ranch._version import __version__

logger = logging.getLogger(__name__)

SERVICE_NAME = "ranch"
"""The `service.name` spans carry unless `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` say otherwise."""
MAX_VALUE_CHARS = 1024
"""The longest string value a call site puts on a span (a path, an agent id): cut to it, whatever a
caller sends, so a queued span's size is bounded."""
FLUSH_WITHIN_MS = 5000
"""How long a stopping server waits for its last spans to be exported."""
_PROPAGATOR = TraceContextTextMapPropagator()
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
    """Install tracing as the `OTEL_*` variables ask, once per process; True when it is on."""
    global _installed
    if _installed or not configured():
        return _tracer is not None
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    provider = _sdk_provider(os.environ)
    trace.set_tracer_provider(provider)
    HTTPXClientInstrumentor().instrument(
        tracer_provider=provider, request_hook=_no_query, async_request_hook=_no_query_async
    )
    enable(provider)
    _installed = True
    logger.info("tracing on: spans are exported by the OpenTelemetry SDK")
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


def _sdk_provider(env: Mapping[str, str]) -> trace.TracerProvider:
    """The SDK's provider (sampler from `OTEL_TRACES_SAMPLER`) with a batch processor and the exporter
    the environment names."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    named = env.get("OTEL_SERVICE_NAME") or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    resource = Resource.create({} if named else {"service.name": SERVICE_NAME})  # the OTEL_* name wins
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter(env)))
    return provider


PROTOCOLS = ("http/protobuf", "grpc")


def exporter(env: Mapping[str, str]) -> Any:
    """The span exporter `OTEL_TRACES_EXPORTER` and `OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL` name; each
    reads the rest of its settings (endpoint, headers, compression, certificates) itself."""
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    named = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
    protocol = (named or PROTOCOLS[0]).strip()
    if protocol == "grpc":
        try:
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (  # type: ignore[import-not-found, unused-ignore]
                OTLPSpanExporter as GrpcExporter,
            )
        except ImportError as exc:
            raise RuntimeError(
                "OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc "
                "(pip install 'opentelemetry-exporter-otlp-proto-grpc')"
            ) from exc
        return GrpcExporter()
    if protocol != "http/protobuf":
        raise ValueError(
            f"OTEL_EXPORTER_OTLP_PROTOCOL: {protocol!r} is not supported (one of: {', '.join(PROTOCOLS)})"
        )
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    return OTLPSpanExporter()


def flush() -> None:
    """Export the spans still buffered (blocks: the provider's batch thread does the export)."""
    force_flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if _installed and force_flush is not None:
        force_flush(FLUSH_WITHIN_MS)


@asynccontextmanager
async def exporting() -> AsyncIterator[None]:
    """The span export's part in a server's lifespan: on the way out, the spans still buffered are
    exported, from a worker thread so the event loop keeps serving what else is stopping. The batch
    processor's thread itself is the SDK's, stopped by its provider at exit."""
    try:
        yield
    finally:
        if _installed:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(flush)


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
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


def resumed(parent: str | None) -> Context | None:
    """The context a stored `traceparent` names (see `traceparent`), else None."""
    return _PROPAGATOR.extract({"traceparent": parent}) if parent else None


def trace_id_of(span: Span) -> str:
    return format(span.get_span_context().trace_id, "032x")


def start(
    name: str,
    attributes: dict[str, Any] | None = None,
    *,
    parent: Span | Context | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
) -> Span | None:
    """A span under `parent` (a span, a context, or the current span), or None while tracing is off."""
    active = _tracer
    if active is None:
        return None
    # a Context is a dict: that check is cheap, where one against the abstract Span is not
    context = parent if parent is None or isinstance(parent, dict) else trace.set_span_in_context(parent)
    return active.start_span(name, context=context, kind=kind, attributes=attributes)


def attach(span: Span) -> object:
    """Make `span` current until `detach` with the token this returns (no context manager)."""
    return otel_context.attach(trace.set_span_in_context(span))


enter = attach
"""A request's span made current for the request (its children: the turn, the hops, outbound calls)."""


def detach(token: object) -> None:
    """Undo the `attach` that returned `token`."""
    otel_context.detach(token)  # type: ignore[arg-type]  # (attach's token, typed as object for callers)


def current_span() -> Span:
    """The span current here (INVALID_SPAN if none)."""
    return trace.get_current_span()


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
