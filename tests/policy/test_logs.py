"""Logs: JSON lines with trace ids; personal data scrubbed from every record, checked on real output."""

from __future__ import annotations

import io
import json
import logging
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from re import _parser  # type: ignore[attr-defined]
from typing import Any

import httpx
import pytest

from _support.hubkit import serve_ranch
from _support.servers import ServerProcess, free_port
from ranch.edge.debug import DEBUG_BODY_BYTES
from ranch.policy.logs import MAX_FIELD_CHARS, PATTERNS, configure_logging, debug_enabled, scrub, traced

EMAIL = "ada.lovelace@example.org"
PHONE = "+44 20 7946 0958"
CARD = "4111 1111 1111 1111"
API_KEY = "sk-proj-abcdefghijklmnop1234567890"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
GITHUB = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
RANCH_KEY = "rk_Q2x-fW9_aZ3kLm0PqRsTuVwXyZ01-_3b"
"""A key as ranch issues them: rk_ and 32 url-safe characters (rooms/agents.py `issue_key`)."""
PHONES = ["555-123-4567", "555 123 4567", "5551234567"]
PII = [EMAIL, PHONE, CARD, API_KEY, JWT, GITHUB, RANCH_KEY, *PHONES, "hunter2pass"]
TEXT = (
    f"mail {EMAIL} or call {PHONE} / 555-123-4567 / 555 123 4567 / 5551234567; card {CARD}; "
    f"key {API_KEY}; Authorization: Bearer {JWT}; {GITHUB}; ranch key {RANCH_KEY}; password=hunter2pass"
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
        "created at 1767225600 (Unix time), took 1234567 ms, version 10.200.3000.1",
        "the demo key rk_demo, id pk_users",
    ],
)
def test_scrub_leaves_ordinary_text(text: str) -> None:
    assert scrub(text) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("call 555 123 4567.", "call [phone]."),
        ("call 5551234567, or (555) 123 4567", "call [phone], or [phone]"),
        (f"X-API-Key: {RANCH_KEY}", "X-API-Key: [secret]"),
        (f"key={RANCH_KEY}&x=1", "key=[secret]&x=1"),
        (f"pasted {RANCH_KEY} here", "pasted [secret] here"),
    ],
)
def test_scrub_finds_ranch_keys_and_plain_phone_numbers(text: str, expected: str) -> None:
    assert scrub(text) == expected


_REPEATS = {_parser.MAX_REPEAT, _parser.MIN_REPEAT, _parser.POSSESSIVE_REPEAT}


def _repeat_bounds(node: Any) -> Iterator[tuple[int, int]]:
    """(min, max) of every repeat in a parsed pattern, nested ones included."""
    if isinstance(node, _parser.SubPattern):
        for op, argument in node:
            if op in _REPEATS:
                yield argument[0], argument[1]
            yield from _repeat_bounds(argument)
    elif isinstance(node, tuple | list):
        for item in node:
            yield from _repeat_bounds(item)


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.pattern[:40])
def test_every_scrubbing_pattern_repeats_a_bounded_number_of_times(pattern: re.Pattern[str]) -> None:
    """No `+`, `*` or `{n,}`: an unbounded repeat is how an unanchored pattern turns quadratic
    (`[A-Za-z0-9._%+-]+@` took 5.4 s on one 65 KB URL path, the event loop frozen meanwhile)."""
    bounds = list(_repeat_bounds(_parser.parse(pattern.pattern, pattern.flags)))
    assert all(high != _parser.MAXREPEAT for _, high in bounds), pattern.pattern


def test_the_patterns_still_find_what_they_are_bounded_around() -> None:
    local = "a" * 64
    assert scrub(f"{local}@example.org") == "[email]"
    assert scrub(f"x{local}@mail.example.co.uk") == "x[email]"  # the last 64 of a longer run
    assert scrub("a@a@a@a@b.example.org") == "a@a@a@[email]"


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


def test_a_long_field_is_cut_with_a_marker_before_it_is_scrubbed(captured: io.StringIO) -> None:
    long = f"from {EMAIL} " + "x" * 100_000 + f" {EMAIL}"
    log = logging.getLogger("ranch.test")
    try:
        raise ValueError(long)
    except ValueError:
        log.exception("asked: %s", long, extra={"body": long})
    line = json.loads(captured.getvalue())
    for field in ("message", "body", "exception"):
        assert len(line[field]) < MAX_FIELD_CHARS + 200, field
        assert "[email]" in line[field] and EMAIL not in line[field], field
        assert re.search(r"…\[truncated \d+ chars\]$", line[field]), line[field][-80:]


def test_debug_mode_logs_only_the_start_of_each_body(tmp_path: Path) -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    level = root.level
    handler = configure_logging(debug=True, stream=stream)
    text = "y" * 20_000
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": text}]}},
    }
    try:
        with serve_ranch("agents:\n  - {id: echo, kind: echo}\n", tmp_path / "t.db", debug=True) as server:
            answer = httpx.post(
                server.agent_url("echo"), json=body, headers={"A2A-Version": "1.0"}, timeout=30
            )
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert answer.status_code == 200 and text in answer.text
    records = [json.loads(line) for line in stream.getvalue().splitlines()]
    logged = [r["message"] for r in records if r["logger"] == "ranch.requests"]
    assert len(logged) == 2, logged  # the request and the answer
    for message in logged:
        assert len(message) < DEBUG_BODY_BYTES + 200 and text not in message
        assert re.search(r"…\[truncated \d+ bytes\]", message), message[-80:]


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


def ranch_serve(tmp_path: Path, **env: str) -> ServerProcess:
    """`ranch serve` of one echo agent as a child process, its output (the JSON log) kept."""
    config = tmp_path / "echo.yaml"
    config.write_text("agents:\n  - {id: echo, kind: echo}\n")
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port)]
    command += ["--db", f"sqlite+aiosqlite:///{tmp_path / 't.db'}"]
    env = {"PATH": "/usr/bin:/bin", **env}
    return ServerProcess(command, port, env=env, log_path=tmp_path / "serve.log", name="ranch")


def test_a_real_server_log_is_scrubbed_and_traced(tmp_path: Path) -> None:
    """`ranch serve` with RANCH_DEBUG=1 logs the full message, scrubbed, under the caller's trace id."""
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    with ranch_serve(tmp_path, RANCH_DEBUG="1") as server:
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


def test_a_65_kb_url_path_is_answered_and_logged_cut(tmp_path: Path) -> None:
    """The access log holds a caller's URL path: a long one is cut with a marker, not scrubbed whole."""
    path = "/x" + "A" * 65_000
    with ranch_serve(tmp_path) as server:
        with httpx.Client(timeout=60, trust_env=False) as http:
            answer = http.get(f"{server.url}{path}")
            assert answer.status_code == 404
            assert http.get(f"{server.url}/healthz").status_code == 200
    records = [json.loads(line) for line in server.output().splitlines() if line.startswith("{")]
    access = [r for r in records if r["logger"] == "ranch.access" and "/xAAAA" in r["path"]]
    assert len(access) == 1, [r["message"][:120] for r in records]
    assert access[0]["status"] == 404 and access[0]["method"] == "GET"
    for field in ("path", "message"):
        assert len(access[0][field]) < MAX_FIELD_CHARS + 200 and path not in access[0][field]
    assert re.search(r"…\[truncated \d+ chars\]$", access[0]["path"]), access[0]["path"][-80:]
