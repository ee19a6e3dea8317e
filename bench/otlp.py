"""A local OTLP/HTTP trace receiver: what a collector is to ranch, on 127.0.0.1, in a thread.

It takes `POST /v1/traces` (protobuf `ExportTraceServiceRequest`, as opentelemetry's OTLP/HTTP
exporter sends it, gzip or not) and keeps every span, flattened. The tracing benchmark sends its
servers' spans here; the tests read them back (`spans`, `wait_for`).
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class ReceivedSpan:
    """One exported span, its ids as hex."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    kind: int
    service: str
    attributes: dict[str, Any]
    status_code: int


@dataclass
class Receiver:
    """The spans received so far, and the receiver's endpoint (for OTEL_EXPORTER_OTLP_ENDPOINT)."""

    endpoint: str
    decode: bool = True
    """False: keep each request's body and decode them only when `spans` is asked (a benchmark's
    receiver then costs the machine next to nothing while the servers run)."""
    received: list[ReceivedSpan] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def spans(self) -> list[ReceivedSpan]:
        with self.lock:
            bodies, self.bodies = self.bodies, []
            for body in bodies:
                self.received.extend(_flatten(ExportTraceServiceRequest.FromString(body)))
            return list(self.received)

    def wait_for(
        self, check: Callable[[list[ReceivedSpan]], bool], timeout: float = 15.0
    ) -> list[ReceivedSpan]:
        """The spans once `check` holds of them; AssertionError with what came when it never does."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            spans = self.spans()
            if check(spans):
                return spans
            time.sleep(0.05)
        names = [(span.service, span.name) for span in self.spans()]
        raise AssertionError(f"the spans never matched within {timeout:g}s; received: {names}")


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in any_value.array_value.values]
    return getattr(any_value, kind) if kind else None


def _flatten(request: ExportTraceServiceRequest) -> list[ReceivedSpan]:
    spans = []
    for resource_spans in request.resource_spans:
        resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                spans.append(
                    ReceivedSpan(
                        name=span.name,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex(),
                        kind=span.kind,
                        service=str(resource.get("service.name", "")),
                        attributes={kv.key: _value(kv.value) for kv in span.attributes},
                        status_code=span.status.code,
                    )
                )
    return spans


@contextmanager
def receiving(max_body: int = 16 * 1024 * 1024, *, decode: bool = True) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1 for the block's duration (`decode`: see `Receiver.decode`)."""
    receiver: Receiver

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # connections kept open between exports, as a collector keeps them

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if self.path != "/v1/traces" or length > max_body:
                self.send_error(404 if self.path != "/v1/traces" else 413)
                return
            body = self.rfile.read(length)
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with receiver.lock:
                if receiver.decode:
                    receiver.received.extend(_flatten(ExportTraceServiceRequest.FromString(body)))
                else:
                    receiver.bodies.append(body)
                receiver.requests += 1
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver = Receiver(endpoint=f"http://127.0.0.1:{server.server_address[1]}", decode=decode)
    thread = threading.Thread(target=server.serve_forever, name="otlp-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
