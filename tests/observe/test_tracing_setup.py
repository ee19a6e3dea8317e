"""Tracing is the OpenTelemetry SDK's, set up by the standard variables only: the OTLP exporter the
protocol names (HTTP or gRPC; each reads its own endpoint, headers, compression and certificates),
the console one, and the sampler `OTEL_TRACES_SAMPLER` names; a protocol it cannot speak is refused
with the variable named."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased

from ranch.observe import tracing


def test_otlp_over_http_by_default() -> None:
    assert isinstance(tracing.exporter({}), HttpExporter)
    assert isinstance(tracing.exporter({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}), HttpExporter)


def test_grpc_and_console_as_the_variables_say() -> None:
    assert isinstance(tracing.exporter({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}), GrpcExporter)
    assert isinstance(tracing.exporter({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}), GrpcExporter)
    assert isinstance(tracing.exporter({"OTEL_TRACES_EXPORTER": "console"}), ConsoleSpanExporter)


def test_a_protocol_it_cannot_speak_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json'"):
        tracing.exporter({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_the_sampler_is_the_one_the_variables_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "parentbased_traceidratio")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER_ARG", "0.1")
    provider = tracing._sdk_provider({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"})
    assert isinstance(provider, TracerProvider)
    sampler = provider.sampler
    assert isinstance(sampler, ParentBased)
    assert "TraceIdRatioBased{0.1}" in sampler.get_description()  # type: ignore[no-untyped-call]
    provider.shutdown()


def test_spans_reach_a_grpc_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    """`OTEL_EXPORTER_OTLP_PROTOCOL=grpc`, end to end: a span recorded through ranch's provider arrives
    at an OTLP/gRPC trace service on 127.0.0.1."""
    received: list[str] = []

    class Collector(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            received.extend(
                span.name
                for spans in request.resource_spans
                for scope in spans.scope_spans
                for span in scope.spans
            )
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Collector(), server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", f"http://127.0.0.1:{port}")
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
        provider = tracing._sdk_provider({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
        assert isinstance(provider, TracerProvider)
        provider.get_tracer("test").start_span("ranch.turn office").end()
        assert provider.force_flush(10_000)
        provider.shutdown()
    finally:
        server.stop(None)
    assert received == ["ranch.turn office"]
