"""The lean tracer's OTLP bytes are what opentelemetry's own encoder makes of the same spans.

`observe.otlp` writes `ExportTraceServiceRequest` bytes by hand (the SDK's encoder cost more than
a whole request); each test records spans with `observe.lean`, builds the SDK's `ReadableSpan` of
each from the same data, and compares the decoded message with `encode_spans`' (protobuf message
equality: every field, every value). Attribute values come from hypothesis too (derandomized in
`make test`, long in `make fuzz`).
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from bench.otlp import ReceivedSpan, receiving
from hypothesis import example, given
from hypothesis import strategies as st
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind, Status, StatusCode

from ranch.observe import otlp, tracing
from ranch.observe.lean import (
    MAX_ATTRIBUTES,
    MAX_EVENTS,
    BatchExporter,
    LeanSpan,
    LeanTracer,
    LeanTracerProvider,
    RequestSpan,
)
from ranch.observe.otlp import MAX_VALUE_CHARS

RESOURCE = Resource.create({"service.name": "ranch-test"})


class Recording(BatchExporter):
    """The exporter, also keeping each span it was given (the tests build the SDK's twin of each)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.spans: list[LeanSpan] = []

    def add(self, span: LeanSpan) -> None:
        self.spans.append(span)
        super().add(span)


@pytest.fixture
def provider() -> Iterator[LeanTracerProvider]:
    exporter = Recording("http://127.0.0.1:9/v1/traces", RESOURCE.attributes, delay=3600)
    yield LeanTracerProvider(exporter)  # no loop runs here: spans stay queued


def sdk_twin(span: LeanSpan) -> ReadableSpan:
    name, version, schema_url = span.scope
    return ReadableSpan(
        name=span.name,
        context=span.get_span_context(),
        parent=span.parent,
        resource=RESOURCE,
        attributes=span.attributes,
        events=[Event(event_name, attrs, at) for event_name, at, attrs in span.events or ()],
        kind=span.kind,
        status=span.status,
        start_time=span.start,
        end_time=span.end_time,
        instrumentation_scope=InstrumentationScope(name, version, schema_url),
    )


def ours(exporter: BatchExporter) -> ExportTraceServiceRequest:
    """What the exporter would send of what it holds now."""
    body, _ = exporter._take()
    decoded: ExportTraceServiceRequest = ExportTraceServiceRequest.FromString(body)
    return decoded


def queued(provider: LeanTracerProvider) -> list[LeanSpan]:
    exporter = provider.exporter
    assert isinstance(exporter, Recording)
    return exporter.spans


def test_a_tree_of_spans_encodes_as_the_sdk_encodes_it(provider: LeanTracerProvider) -> None:
    tracer = provider.get_tracer("ranch", "1.2.3")
    other = provider.get_tracer(
        "opentelemetry.instrumentation.httpx", None, "https://opentelemetry.io/schemas/1.11.0"
    )
    request = {"http.request.method": "POST", "ranch.agent": "office"}
    with tracer.start_as_current_span("POST /a2a/agents/{agent}", kind=SpanKind.SERVER, attributes=request):
        turn = tracer.start_span("ranch.turn office", attributes={"ranch.max_hops": 5})
        with trace.use_span(turn, end_on_exit=True):
            with other.start_as_current_span("POST", kind=SpanKind.CLIENT) as client:
                client.set_attribute("http.response.status_code", 503)
                client.set_status(Status(StatusCode.ERROR, "HTTP 503"))
            hop = tracer.start_span("ranch.hop desk", attributes={"ranch.peers": ["helper", "critic"]})
            hop.set_attributes({"ranch.fallback": False, "ranch.ms": 1.5, "ranch.hop": 1, "ranch.delta": -3})
            hop.record_exception(ValueError("bad recipient"))
            hop.set_status(StatusCode.ERROR, "bad recipient")
            hop.end()
    spans = queued(provider)
    assert [span.name for span in spans] == [
        "POST",
        "ranch.hop desk",
        "ranch.turn office",
        "POST /a2a/agents/{agent}",
    ]
    assert ours(provider.exporter) == encode_spans([sdk_twin(span) for span in spans])


def test_a_remote_parent_and_its_trace_state_are_kept(provider: LeanTracerProvider) -> None:
    remote = trace.SpanContext(0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, True,
                               trace.TraceFlags(1), trace.TraceState([("vendor", "x1")]))  # fmt: skip
    parent = trace.set_span_in_context(trace.NonRecordingSpan(remote))
    span = provider.get_tracer("ranch").start_span("POST /mcp", context=parent, kind=SpanKind.SERVER)
    span.end()
    (recorded,) = queued(provider)
    assert recorded.get_span_context().trace_id == remote.trace_id and recorded.parent == remote
    assert ours(provider.exporter) == encode_spans([sdk_twin(recorded)])


def test_equal_values_of_other_types_keep_their_types(provider: LeanTracerProvider) -> None:
    tracer = provider.get_tracer("ranch")
    for value in (1, True, 1.0, "1", (1,), 0, False, 0.0, ""):  # equal in Python, not on the wire
        span = tracer.start_span("span", attributes={"n": value})
        span.add_event("event", {"n": value})
        span.end()
    spans = queued(provider)
    assert ours(provider.exporter) == encode_spans([sdk_twin(span) for span in spans])


values = st.one_of(
    st.text(max_size=40),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False),
    st.lists(st.text(max_size=10), max_size=4),
    st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=4),
)


@given(st.dictionaries(st.text(min_size=1, max_size=20), values, max_size=8), st.text(max_size=30))
@example(attributes={"0": ""}, name="")  # an event's attribute once took a span's cached bytes
def test_any_attributes_encode_as_the_sdk_encodes_them(attributes: dict[str, Any], name: str) -> None:
    exporter = Recording("http://127.0.0.1:9/v1/traces", RESOURCE.attributes, delay=3600)
    span = LeanTracerProvider(exporter).get_tracer("ranch").start_span(name, attributes=attributes)
    span.add_event("event", attributes)
    span.end()
    (recorded,) = exporter.spans
    assert ours(exporter) == encode_spans([sdk_twin(recorded)])


def sent_from_a_loop(end: Callable[[LeanTracer, int], None]) -> tuple[BatchExporter, list[ReceivedSpan], int]:
    """25 spans ended on a loop (`end(tracer, number)`), sent in batches of 10 to a receiver: the
    exporter, the spans received and how many requests brought them."""

    async def serve(endpoint: str) -> BatchExporter:
        exporter = BatchExporter(endpoint + "/v1/traces", RESOURCE.attributes, delay=0.05, max_batch=10)
        tracer = LeanTracerProvider(exporter).get_tracer("ranch")
        assert isinstance(tracer, LeanTracer)
        for number in range(25):
            end(tracer, number)
        for _ in range(200):  # the loop sends them: two full batches at once, the rest after `delay`
            if exporter.exported == 25:
                break
            await asyncio.sleep(0.02)
        return exporter

    with receiving() as receiver:
        exporter = asyncio.run(serve(receiver.endpoint))
        spans = receiver.wait_for(lambda spans: len(spans) == 25)
    return exporter, spans, receiver.requests


def test_spans_ended_on_a_loop_are_sent_by_it_in_batches() -> None:
    def end(tracer: LeanTracer, number: int) -> None:
        tracer.start_span(f"span {number}", attributes={"n": number}).end()

    exporter, spans, requests = sent_from_a_loop(end)
    assert sorted(span.attributes["n"] for span in spans) == list(range(25))
    assert {span.service for span in spans} == {"ranch-test"} and requests == 3
    assert exporter.exported == 25 and exporter.dropped == 0
    assert not any(span.name.startswith("POST") for span in spans)  # the export is not traced


def test_flush_sends_what_ended_with_no_loop() -> None:
    with receiving() as receiver:
        exporter = BatchExporter(receiver.endpoint + "/v1/traces", RESOURCE.attributes, max_batch=10)
        tracer = LeanTracerProvider(exporter).get_tracer("ranch")
        for number in range(12):
            tracer.start_span(f"span {number}").end()
        assert exporter.flush(10)
        receiver.wait_for(lambda spans: len(spans) == 12)
    assert exporter.exported == 12 and receiver.requests == 2


def test_a_full_queue_drops_spans_and_counts_them() -> None:
    exporter = BatchExporter("http://127.0.0.1:9/v1/traces", RESOURCE.attributes, delay=3600, max_queue=5,
                             max_batch=100)  # fmt: skip
    tracer = LeanTracerProvider(exporter).get_tracer("ranch")
    for _ in range(8):
        tracer.start_span("span").end()
    assert len(exporter._queue) == 5 and exporter.dropped == 3


def test_a_parent_that_is_not_sampled_is_followed(provider: LeanTracerProvider) -> None:
    unsampled = trace.SpanContext(
        0x4BF92F3577B34DA6A3CE929D0E0E4736, 0x00F067AA0BA902B7, True, trace.TraceFlags(0)
    )
    span = provider.get_tracer("ranch").start_span("POST /mcp", context=trace.set_span_in_context(
        trace.NonRecordingSpan(unsampled)))  # fmt: skip
    span.end()
    assert not span.is_recording() and span.get_span_context() == unsampled
    assert queued(provider) == [] and provider.exporter._queue == []


def test_long_values_are_cut_and_never_kept(provider: LeanTracerProvider) -> None:
    span = provider.get_tracer("ranch").start_span("GET other", attributes={"url.path": "/" + "a" * 100_000})
    span.set_attribute("late", "b" * 100_000)
    span.end()
    (recorded,) = queued(provider)
    twin = sdk_twin(recorded)
    twin._attributes = {key: str(value)[:MAX_VALUE_CHARS] for key, value in recorded.attributes.items()}
    assert ours(provider.exporter) == encode_spans([twin])  # the SDK's bytes for the cut values
    assert all(len(key[3]) <= otlp.KEPT_CHARS for key in otlp._kept if isinstance(key[3], str))


def test_a_span_that_cannot_be_encoded_is_dropped_not_its_batch() -> None:
    exporter = BatchExporter("http://127.0.0.1:9/v1/traces", RESOURCE.attributes, delay=3600)
    tracer = LeanTracerProvider(exporter).get_tracer("ranch")
    tracer.start_span("before").end()
    span = tracer.start_span("bad")
    span.set_attribute("bad", object())  # type: ignore[arg-type]
    span.end()  # must not raise into the request that ends it
    tracer.start_span("after").end()
    sent = ours(exporter)
    assert [span.name for span in sent.resource_spans[0].scope_spans[0].spans] == ["before", "after"]
    assert exporter.dropped == 1 and exporter._queue == []


def test_a_span_holds_bounded_values_whatever_a_caller_sends(provider: LeanTracerProvider) -> None:
    """The queue is bounded in spans; each span, in attributes, events and the length of each value."""
    many = {f"key {number}": number for number in range(500)}
    span = provider.get_tracer("ranch").start_span("span", attributes=many)
    span.set_attribute("late", "b" * 100_000)  # past the limit of attributes: dropped
    span.set_attribute("key 1", ["c" * 5_000] * 1_000)  # a key it has: replaced, bounded
    for number in range(300):
        span.add_event(f"event {number}", {"text": "d" * 5_000})
    span.end()
    (recorded,) = queued(provider)
    assert len(recorded.attributes) == MAX_ATTRIBUTES and "late" not in recorded.attributes
    assert recorded.attributes["key 1"] == ("c" * MAX_VALUE_CHARS,) * MAX_ATTRIBUTES
    assert recorded.events is not None and len(recorded.events) == MAX_EVENTS
    assert all(len(values["text"]) == MAX_VALUE_CHARS for _, _, values in recorded.events if values)
    assert ours(provider.exporter) == encode_spans([sdk_twin(recorded)])  # and they export as the SDK's


def test_a_collector_that_never_answers_holds_at_most_two_batches_in_flight() -> None:
    """Spans wait in the bounded queue instead of piling up in requests that never end."""
    listener = socket.create_server(("127.0.0.1", 0))  # accepts, never answers
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/traces"

        async def busy() -> BatchExporter:
            exporter = BatchExporter(
                url, RESOURCE.attributes, delay=0.01, max_batch=5, max_queue=20, timeout=5
            )
            tracer = LeanTracerProvider(exporter).get_tracer("ranch")
            for _ in range(200):
                tracer.start_span("span").end()
                await asyncio.sleep(0.002)
            assert len(exporter._sending) <= BatchExporter.MAX_IN_FLIGHT
            for task in list(exporter._sending):
                task.cancel()
            return exporter

        exporter = asyncio.run(busy())
    finally:
        listener.close()
    assert exporter.dropped > 100 and len(exporter._queue) <= 20


def test_outbound_urls_lose_their_query_in_client_spans() -> None:
    exporter = BatchExporter("http://127.0.0.1:9/v1/traces", RESOURCE.attributes, delay=3600)
    span = LeanTracerProvider(exporter).get_tracer("httpx").start_span("POST")
    span.set_attribute("url.full", "https://hooks.example.com/in?token=secret")
    tracing._no_query(span, SimpleNamespace(url=httpx.URL("https://hooks.example.com/in?token=secret")))
    assert isinstance(span, LeanSpan) and span.attributes["url.full"] == "https://hooks.example.com/in"


REQUEST = ("POST /a2a/agents/{agent}", {"http.request.method": "POST", "ranch.agent": "echo"})


def described(subject: object, outcome: tuple[int, str | None]) -> tuple[str, dict[str, Any]]:
    """A `describe` as the edge's: the same tuple for equal requests (one per outcome here)."""
    return DESCRIBED.setdefault(
        outcome, (REQUEST[0], {**REQUEST[1], "http.response.status_code": outcome[0]})
    )


DESCRIBED: dict[tuple[int, str | None], tuple[str, dict[str, Any]]] = {}


def request_twin(span: RequestSpan) -> ReadableSpan:
    """The SDK's span for a request span: what `describe` said of it, with what was set on it."""
    name, values = described(None, span.outcome)  # type: ignore[arg-type]  # (set as it was answered)
    context = trace.SpanContext(
        span.trace_id, span.span_id, False, trace.TraceFlags(trace.TraceFlags.SAMPLED)
    )
    return ReadableSpan(
        name=span.name or name, context=context, parent=None, resource=RESOURCE, kind=SpanKind.SERVER,
        attributes={**values, **span.attributes}, status=span.status, start_time=span.start,
        end_time=span.end_time, instrumentation_scope=InstrumentationScope(*span.scope),
    )  # fmt: skip


def test_request_spans_encode_as_the_sdk_encodes_them(provider: LeanTracerProvider) -> None:
    """Plain ones from their description's bytes, one pack each; one with more set on it, and a
    failed one, the general way; in one batch with the tracer's other spans."""
    tracer = provider.get_tracer("ranch")
    assert isinstance(tracer, LeanTracer)
    requests = []
    for number in range(4):
        span = RequestSpan(f"{number + 1:032x}", None, described, tracer.scope, tracer.exporter)
        if number == 2:
            span.set_attribute("ranch.org", "acme")
        if number == 3:
            span.set_status(Status(StatusCode.ERROR, "HTTP 500"))
        span.answered((500 if number == 3 else 200, None))
        requests.append(span)
    other = tracer.start_span("other", attributes={"n": 1})
    other.end()
    assert [span.plain() for span in requests] == [True, True, False, False]
    assert ours(provider.exporter) == encode_spans(
        [*map(request_twin, requests), sdk_twin(queued(provider)[-1])]
    )
    assert otlp.unframed(requests[0].framed()) == requests[0].encoded()


def test_request_spans_answered_on_a_loop_are_sent_by_it_in_batches() -> None:
    def end(tracer: LeanTracer, number: int) -> None:
        RequestSpan(f"{number + 1:032x}", None, described, tracer.scope, tracer.exporter).answered(
            (200, None)
        )

    exporter, spans, requests = sent_from_a_loop(end)
    assert sorted(int(span.trace_id, 16) for span in spans) == list(range(1, 26))
    assert {span.name for span in spans} == {REQUEST[0]} and requests == 3
    assert exporter.exported == 25 and exporter.dropped == 0


def entered_and_started(trace_hex: str, name: str) -> tuple[RequestSpan, object, LeanSpan]:
    """A request span entered (`tracing.enter`), its token, and a span then started with no parent."""
    request = tracing.request_span(trace_hex, None, described)
    assert isinstance(request, RequestSpan)
    token = tracing.enter(request)
    child = tracing.start(name)
    assert isinstance(child, LeanSpan)
    return request, token, child


def test_a_request_span_entered_is_the_parent_of_what_starts_under_it() -> None:
    """`tracing.enter` makes it current without a context built for it: spans started with no
    parent nest under it, a span made current in OpenTelemetry's context wins while it is, and a
    request served inside another span (an in-process call) still parents its own spans."""
    exporter = Recording("http://127.0.0.1:9/v1/traces", RESOURCE.attributes, delay=3600)
    tracing.enable(LeanTracerProvider(exporter))
    try:
        request, token, child = entered_and_started("ab" * 16, "child")
        assert child.parent is not None and child.parent.span_id == request.span_id
        assert tracing.traceparent() == f"00-{'ab' * 16}-{request.span_id:016x}-01"
        with tracing.current(child):
            grandchild = tracing.start("grandchild")
            assert isinstance(grandchild, LeanSpan) and grandchild.parent == child.get_span_context()
        tracing.detach(token)
        assert tracing.start("after") is not None and tracing.traceparent() is None

        outer = tracing.start("outer")
        assert outer is not None
        with tracing.current(outer):
            inner, token, nested = entered_and_started("cd" * 16, "nested")
            assert nested.parent is not None and nested.parent.span_id == inner.span_id
            tracing.detach(token)
    finally:
        tracing.disable()
