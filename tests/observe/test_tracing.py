"""OpenTelemetry traces: a span per request, team turn and hop, with the routing attributes, continuing
the caller's `traceparent`; one trace across two ranch servers; off, nothing is recorded.

In process, spans go to the SDK's in-memory exporter; across servers, two `ranch serve` processes
export over OTLP/HTTP to a receiver started here (bench/otlp.py).
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
from bench.otlp import ReceivedSpan, receiving
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanContext, SpanKind

from _support.hubkit import ADMIN_KEY, Api, serve_ranch, wait_until
from _support.servers import ServerProcess, free_port
from ranch.observe import tracing

TEAM = """
agents:
  - id: desk
    kind: rules
    rules:
      - {match: "^done", reply: "all done: {text}", route: user, reason: work is finished}
      - {reply: "please look: {text}", route: helper, reason: needs the helper}
  - id: helper
    kind: rules
    rules: [{reply: "done {text}", route: desk, reason: back to the desk}]
teams:
  - {id: office, members: [desk, helper], default_agent: desk, max_hops: 5}
"""
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


def send(url: str, text: str, headers: dict[str, str] | None = None) -> httpx.Response:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = httpx.post(url, json=body, headers={"A2A-Version": "1.0", **(headers or {})}, timeout=30)
    assert answer.status_code == 200 and "result" in answer.json(), answer.text
    return answer


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def parent_of(span: ReadableSpan) -> int:
    assert span.parent is not None, f"{span.name} has no parent"
    return span.parent.span_id


def context_of(span: ReadableSpan) -> SpanContext:
    context: SpanContext | None = span.context
    assert context is not None
    return context


def by_name(finished: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [span for span in finished if span.name.startswith(prefix)]


def test_a_team_turn_is_a_tree_of_request_turn_and_hop_spans(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    with serve_ranch(TEAM, tmp_path / "t.db") as hub:
        answer = send(hub.agent_url("office"), "the report", {"traceparent": f"00-{TRACE}-{PARENT}-01"})
        wait_until(lambda: by_name(spans.get_finished_spans(), "POST"), what="the request span ended")
    finished = spans.get_finished_spans()
    assert answer.headers["x-trace-id"] == TRACE  # logs, the header and the spans agree
    (request,) = by_name(finished, "POST /a2a/agents/{agent}")
    (turn,) = by_name(finished, "ranch.turn office")
    hops = sorted(by_name(finished, "ranch.hop"), key=lambda span: attrs(span)["ranch.hop"])
    assert all(context_of(span).trace_id == int(TRACE, 16) for span in finished)
    assert request.kind is SpanKind.SERVER and parent_of(request) == int(PARENT, 16)
    assert attrs(request)["ranch.agent"] == "office" and attrs(request)["http.response.status_code"] == 200
    assert parent_of(turn) == context_of(request).span_id
    assert attrs(turn)["ranch.hops"] == 3 and attrs(turn)["ranch.state"] == "TASK_STATE_COMPLETED"
    assert "error.type" not in attrs(turn)  # its reader stopping after the final event is no failure
    assert [parent_of(hop) for hop in hops] == [context_of(turn).span_id] * 3
    route = [(attrs(h)["ranch.agent"], attrs(h)["ranch.sender"], attrs(h)["ranch.recipient"]) for h in hops]
    assert route == [("desk", "user", "helper"), ("helper", "desk", "desk"), ("desk", "helper", "user")]
    first = attrs(hops[0])
    assert first["ranch.team"] == "office" and first["ranch.reason"] == "needs the helper"
    assert first["ranch.hops_remaining"] == 5 and first["ranch.chosen_because"] == "default agent"
    assert first["ranch.fallback"] is False
    assert list(attrs(hops[1])["ranch.peers"]) == ["desk"]  # the peers the helper was offered


def test_a_failed_hop_carries_its_error_type(spans: InMemorySpanExporter, tmp_path: Path) -> None:
    config = TEAM.replace("max_hops: 5", "max_hops: 1")
    with serve_ranch(config, tmp_path / "t.db") as hub:
        send(hub.agent_url("office"), "the report")
        wait_until(lambda: by_name(spans.get_finished_spans(), "ranch.turn"), what="the turn span ended")
    (turn,) = by_name(spans.get_finished_spans(), "ranch.turn")
    assert attrs(turn)["error.type"] == "HopLimitExceeded"
    assert attrs(turn)["ranch.state"] == "TASK_STATE_FAILED"


def test_room_turns_join_the_trace_of_the_message_that_woke_them(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    with serve_ranch(TEAM, tmp_path / "t.db") as hub:
        api = Api(hub.url, ADMIN_KEY)
        room = api.post("/rooms", {"title": "t", "default_agent": "office",
                                   "participants": [{"kind": "team", "id": "office"}]})  # fmt: skip
        headers = {"traceparent": f"00-{TRACE}-{PARENT}-01"}
        posted = httpx.post(f"{hub.url}/api/v1/rooms/{room['id']}/messages", json={"text": "the report"},
                            headers={**api.headers, **headers}, timeout=10)  # fmt: skip
        assert posted.status_code == 201, posted.text
        wait_until(lambda: by_name(spans.get_finished_spans(), "ranch.delivery"), what="the delivery ended")
        wait_until(lambda: len(api.messages(room["id"])) >= 4, what="the team's replies in the room")
        events = api.get(f"/rooms/{room['id']}/events", limit=200)["items"]
    finished = spans.get_finished_spans()
    (delivery,) = by_name(finished, "ranch.delivery office")
    (turn,) = by_name(finished, "ranch.turn office")
    assert context_of(delivery).trace_id == int(TRACE, 16) == context_of(turn).trace_id
    (post,) = [
        span for span in by_name(finished, "POST /api/v1") if context_of(span).trace_id == int(TRACE, 16)
    ]
    assert parent_of(delivery) == context_of(post).span_id
    decided = [event["data"] for event in events if event["type"] == "routing.decided"]
    assert decided and all(data["trace_id"] == TRACE for data in decided)  # the page shows it


def test_off_nothing_is_recorded(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert tracing.tracer() is None  # no OTEL_* exporter configured: off
    with serve_ranch(TEAM, tmp_path / "t.db") as hub:
        answer = send(hub.agent_url("office"), "the report", {"traceparent": f"00-{TRACE}-{PARENT}-01"})
    assert answer.headers["x-trace-id"] == TRACE  # the caller's trace id still labels logs
    assert exporter.get_finished_spans() == ()


INNER = """
agents:
  - id: inner-desk
    kind: rules
    rules: [{reply: "inner answer to {text}", route: user, reason: inner answers}]
teams:
  - {id: inner, members: [inner-desk], default_agent: inner-desk}
"""
OUTER = """
agents:
  - id: front
    kind: rules
    rules:
      - {{match: "^inner answer", reply: "{{text}}", route: user, reason: the far team answered}}
      - {{reply: "asking: {{text}}", route: far, reason: the far team knows}}
  - {{id: far, kind: remote, url: "{url}/a2a/agents/inner"}}
teams:
  - {{id: outer, members: [front, far], default_agent: front}}
"""


def serve_process(config: Path, tmp_path: Path, endpoint: str, service: str) -> ServerProcess:
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port)]
    command += ["--db", f"sqlite+aiosqlite:///{tmp_path / (service + '.db')}", "--caller-rate", "off"]
    env = {
        "PATH": "/usr/bin:/bin",
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        "OTEL_SERVICE_NAME": service,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
    }
    return ServerProcess(command, port, env=env, log_path=tmp_path / f"{service}.log", name=service)


def test_one_trace_across_two_ranch_servers(tmp_path: Path) -> None:
    with receiving() as receiver:
        (tmp_path / "inner.yaml").write_text(INNER)
        with serve_process(tmp_path / "inner.yaml", tmp_path, receiver.endpoint, "inner-ranch") as inner:
            (tmp_path / "outer.yaml").write_text(OUTER.format(url=inner.url))
            with serve_process(tmp_path / "outer.yaml", tmp_path, receiver.endpoint, "outer-ranch") as outer:
                answer = send(f"{outer.url}/a2a/agents/outer", "where is it?")
                trace_id = answer.headers["x-trace-id"]

                def complete(spans: list[ReceivedSpan]) -> bool:
                    names = {(span.service, span.name) for span in spans if span.trace_id == trace_id}
                    wanted = {("outer-ranch", "ranch.turn outer"), ("inner-ranch", "ranch.turn inner")}
                    # the inner server's request span ends after its answer is sent: exported last
                    return wanted | {("inner-ranch", "POST /a2a/agents/{agent}")} <= names

                spans = [span for span in receiver.wait_for(complete) if span.trace_id == trace_id]
    by_id = {span.span_id: span for span in spans}
    (inner_request,) = [
        s for s in spans if s.service == "inner-ranch" and s.name == "POST /a2a/agents/{agent}"
    ]
    client = by_id[inner_request.parent_id]  # the outer server's outbound call, as a client span
    assert client.service == "outer-ranch" and client.kind == 3  # SPAN_KIND_CLIENT
    hop = by_id[client.parent_id]
    assert hop.name == "ranch.hop far" and hop.attributes["ranch.agent"] == "far"
    outer_turn = by_id[hop.parent_id]
    assert outer_turn.name == "ranch.turn outer"
    (inner_turn,) = [s for s in spans if s.name == "ranch.turn inner"]
    assert inner_turn.parent_id == inner_request.span_id
    assert {span.service for span in spans} == {"outer-ranch", "inner-ranch"}


def test_a_request_without_a_trace_exports_its_span_with_its_outcome(tmp_path: Path) -> None:
    """A new trace's request span, exported over OTLP/HTTP by the SDK: its name, attributes, status
    and trace id, the one the answer's `x-trace-id` names; a failed request's span says so."""
    with receiving() as receiver:
        (tmp_path / "t.yaml").write_text(TEAM)
        with serve_process(tmp_path / "t.yaml", tmp_path, receiver.endpoint, "ranch-sdk") as server:
            answers = [send(f"{server.url}/a2a/agents/desk", f"done {n}") for n in range(3)]
            missing = httpx.post(f"{server.url}/a2a/agents/nobody", json={}, timeout=10)
            traces = [answer.headers["x-trace-id"] for answer in answers]
            missing_trace = missing.headers["x-trace-id"]

            def complete(spans: list[ReceivedSpan]) -> bool:
                return {*traces, missing_trace} <= {span.trace_id for span in spans}

            spans = receiver.wait_for(complete)
    requests = {span.trace_id: span for span in spans if span.kind == 2}  # SPAN_KIND_SERVER
    for trace_id in traces:
        span = requests[trace_id]
        assert span.name == "POST /a2a/agents/{agent}" and span.parent_id == "" and span.status_code == 0
        assert span.attributes == {
            "http.request.method": "POST",
            "url.path": "/a2a/agents/desk",
            "ranch.entry": "a2a",
            "ranch.agent": "desk",
            "client.address": "127.0.0.1",
            "http.response.status_code": 200,
        }
    assert len({requests[trace_id].span_id for trace_id in traces}) == 3  # three spans, not one kept
    failed = requests[missing_trace]
    assert failed.attributes["http.response.status_code"] == missing.status_code == 404
    assert failed.attributes["ranch.agent"] == "nobody"
