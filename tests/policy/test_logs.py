"""Logs: JSON lines with trace ids; personal data scrubbed from every record, checked on real output."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ranch.policy.logs import configure_logging, debug_enabled, scrub, traced
from servers import ServerProcess, free_port

EMAIL = "ada.lovelace@example.org"
PHONE = "+44 20 7946 0958"
CARD = "4111 1111 1111 1111"
API_KEY = "sk-proj-abcdefghijklmnop1234567890"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
GITHUB = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
PII = [EMAIL, PHONE, CARD, API_KEY, JWT, GITHUB, "555-123-4567", "hunter2pass"]
TEXT = (
    f"mail {EMAIL} or call {PHONE} / 555-123-4567; card {CARD}; key {API_KEY}; "
    f"Authorization: Bearer {JWT}; {GITHUB}; password=hunter2pass"
)


def test_scrub_replaces_each_kind() -> None:
    scrubbed = scrub(TEXT)
    for secret in PII:
        assert secret not in scrubbed, (secret, scrubbed)
    for label in ("[email]", "[phone]", "[card]", "[secret]"):
        assert label in scrubbed, scrubbed


@pytest.mark.parametrize(
    "text",
    [
        "task 7f3a9c2e-1b4d-4e8f-9a6b-0c1d2e3f4a5b completed",
        "2026-01-05T10:11:12.123Z took 12.5 ms",
        "order 1234567890123456 (not a Luhn number)",
        "version 1.2.3, port 8000, 3 hops",
        "sha 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    ],
)
def test_scrub_leaves_ordinary_text(text: str) -> None:
    assert scrub(text) == text


def test_debug_switch_and_alias() -> None:
    assert debug_enabled({"RANCH_DEBUG": "1"}) and debug_enabled({"PROTOCOL_DEBUG": "true"})
    assert not debug_enabled({}) and not debug_enabled({"RANCH_DEBUG": "0"})


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_logging(debug=False, stream=stream)
    try:
        yield stream
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_records_are_json_with_trace_ids_and_scrubbed(captured: io.StringIO) -> None:
    log = logging.getLogger("ranch.test")
    with traced("0af7651916cd43dd8448eb211c80319c"):
        log.warning("user wrote %s", TEXT, extra={"caller": EMAIL})
        try:
            raise ValueError(f"bad token={API_KEY}")
        except ValueError:
            log.exception("failed for %s", EMAIL)
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    assert [line["trace_id"] for line in lines] == ["0af7651916cd43dd8448eb211c80319c"] * 2
    assert lines[0]["level"] == "warning" and lines[0]["logger"] == "ranch.test"
    assert lines[0]["caller"] == "[email]" and "ValueError" in lines[1]["exception"]
    for secret in PII:
        assert secret not in captured.getvalue()


def test_uvicorns_coloured_copy_of_the_message_is_left_out(captured: io.StringIO) -> None:
    # the record as uvicorn makes it (under `ranch serve` its loggers propagate to ranch's handler;
    # in this suite other servers may have configured uvicorn's own loggers, so a plain one is used)
    logging.getLogger("ranch.test.uvicorn").warning(
        "Started server process [%d]",
        7,
        extra={"color_message": "Started server process [\x1b[36m%d\x1b[0m]"},
    )
    line = json.loads(captured.getvalue())
    assert line["message"] == "Started server process [7]" and "color_message" not in line
    assert "\x1b" not in captured.getvalue() and "\\u001b" not in captured.getvalue()


def test_a_real_server_log_is_scrubbed_and_traced(tmp_path: Path) -> None:
    """`ranch serve` with RANCH_DEBUG=1 logs the full message, scrubbed, under the caller's trace id."""
    config = tmp_path / "echo.yaml"
    config.write_text("agents:\n  - {id: echo, kind: echo}\n")
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port)]
    command += ["--db", f"sqlite+aiosqlite:///{tmp_path / 't.db'}"]
    env = {"RANCH_DEBUG": "1", "PATH": "/usr/bin:/bin"}
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    with ServerProcess(command, port, env=env, log_path=tmp_path / "serve.log", name="ranch") as server:
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": TEXT}]}},
        }
        headers = {"A2A-Version": "1.0", "traceparent": f"00-{trace}-00f067aa0ba902b7-01"}
        with httpx.Client(timeout=10, trust_env=False) as http:
            answer = http.post(f"{server.url}/a2a/agents/echo", json=body, headers=headers)
        assert answer.status_code == 200 and answer.headers["x-trace-id"] == trace
        assert EMAIL in answer.text  # the caller gets its own answer; only the logs are scrubbed
    output = server.output()
    records = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    traced_records = [r for r in records if r["trace_id"] == trace]
    assert len(traced_records) >= 2, output  # the request and its answer, with timing
    assert any("[email]" in r["message"] and "[card]" in r["message"] for r in traced_records), output
    assert any("duration_ms" in r for r in traced_records), output
    for secret in PII:
        assert secret not in output, secret
