"""The access log: one line per request, JSON or text, with its trace id and a scrubbed path.

In process for the line itself; `ranch serve` as a child process for what a deployment writes
by default, with `--log-format text` and with `--no-access-log`.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import select
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from _support.fuzzkit import fuzzing
from _support.servers import ServerProcess, free_port
from ranch.policy import logs
from ranch.policy.logs import NEEDS_CARE, AccessLog, scrub

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
EMAIL = "ada.lovelace@example.org"


def line_of(log_format: str, path: str, query: bytes = b"") -> str:
    stream = io.StringIO()
    AccessLog(stream, json=log_format == "json")("POST", path, query, 201, 0.00042, TRACE, "127.0.0.9")
    return stream.getvalue()


def test_a_json_line_has_the_request_its_answer_and_its_trace_id() -> None:
    text = line_of("json", "/a2a/agents/echo")
    assert text.endswith("\n") and text.count("\n") == 1
    line = json.loads(text)
    assert line["logger"] == "ranch.access" and line["level"] == "info"
    assert (line["method"], line["path"], line["status"]) == ("POST", "/a2a/agents/echo", 201)
    assert line["duration_ms"] == 0.42 and line["trace_id"] == TRACE and line["client"] == "127.0.0.9"
    assert line["message"] == "POST /a2a/agents/echo 201"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["time"]), line["time"]


def test_a_text_line_has_the_same_for_a_person() -> None:
    text = line_of("text", "/a2a/agents/echo")
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}"
    expected = rf"{stamp} 127\.0\.0\.9 POST /a2a/agents/echo 201 0\.42ms trace={TRACE}\n"
    assert re.fullmatch(expected, text), text


def test_a_path_with_an_email_is_scrubbed_in_both_formats() -> None:
    path = f"/api/v1/users/{EMAIL}"
    assert json.loads(line_of("json", path))["path"] == "/api/v1/users/[email]"
    assert " /api/v1/users/[email] " in line_of("text", path)
    query = json.loads(line_of("json", "/api/v1/ws", b"token=rk_Q2x-fW9_aZ3kLm0PqRsTuVwXyZ01-_3b"))
    assert query["path"] == "/api/v1/ws?token=[secret]", query


def test_quotes_and_control_characters_cannot_break_a_line() -> None:
    path = '/x"}\n{"forged": 1\x1b[31m'
    line = json.loads(line_of("json", path))  # one valid JSON object, whatever the path held
    assert line["path"] == path
    text = line_of("text", path)
    assert text.count("\n") == 1 and "\x1b" not in text and "\\x1b" in text


@fuzzing(300)
@given(st.text(alphabet=st.sampled_from("0123456789 -+().@_:=aekKAyzIJ/"), max_size=40))
def test_a_path_the_quick_check_passes_holds_nothing_to_scrub(text: str) -> None:
    """Only paths `NEEDS_CARE` finds something in are scrubbed: it must find all that `scrub` would change."""
    if not NEEDS_CARE.search(text):
        assert scrub(text) == text


def test_the_quick_check_lets_plain_paths_through() -> None:
    for path in ("/a2a/agents/echo", "/a2a/agents/helpdesk/", "/api/v1/rooms/r1/messages", "/healthz"):
        assert not NEEDS_CARE.search(path), path


def test_the_lines_of_one_tick_are_written_together_when_it_ends(tmp_path: Path) -> None:
    """With a file descriptor, a tick's lines wait for the tick's end and go out in one write;
    none is lost, and a flush (as `ranch serve` does on its way out) writes what is left."""
    target = tmp_path / "access.log"

    async def three_requests_in_one_tick(log: AccessLog) -> tuple[str, str]:
        async with log:  # as the hub's lifespan enters it: its writer task writes each tick's lines
            for path in ("/a", "/b", "/c"):
                log("POST", path, b"", 200, 0.001, TRACE, "127.0.0.9")
            during = target.read_text()
            await asyncio.sleep(0)
            return during, target.read_text()

    with target.open("w") as stream:
        log = AccessLog(stream, json=False)
        during, after = asyncio.run(three_requests_in_one_tick(log))
        log("POST", "/d", b"", 200, 0.001, TRACE, "127.0.0.9")  # not entered: written at once
        outside = target.read_text()
    assert during == ""
    assert [line.split()[4] for line in after.splitlines()] == ["/a", "/b", "/c"]
    assert outside.splitlines()[-1].split()[4] == "/d"


class _WriteSpy:
    """`os` as the access log sees it, with `write` counted."""

    def __init__(self, write: Callable[[int, bytes], int]) -> None:
        self.write = write

    def __getattr__(self, name: str) -> Any:
        return getattr(os, name)


def test_no_write_is_larger_than_a_pipe_takes_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers share one stderr pipe: a write of at most PIPE_BUF bytes is never split, so however
    many lines one tick holds, they go out in writes that size and every line arrives whole."""
    sizes: list[int] = []
    real_write = os.write

    def write(fd: int, data: bytes) -> int:
        sizes.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(logs, "os", _WriteSpy(write))
    target = tmp_path / "access.log"

    async def many_requests_in_one_tick(log: AccessLog) -> None:
        async with log:
            for index in range(200):
                log("POST", f"/a2a/agents/agent-{index}", b"", 200, 0.001, TRACE, "127.0.0.9")
            await asyncio.sleep(0)

    with target.open("w") as stream:
        asyncio.run(many_requests_in_one_tick(AccessLog(stream)))
    lines = [json.loads(line) for line in target.read_text().splitlines()]
    assert [line["path"] for line in lines] == [f"/a2a/agents/agent-{index}" for index in range(200)]
    assert 1 < len(sizes) < 200 and max(sizes) <= select.PIPE_BUF, sizes


def _serve(tmp_path: Path, *flags: str) -> ServerProcess:
    tmp_path.mkdir(exist_ok=True)
    config = tmp_path / "echo.yaml"
    config.write_text("agents:\n  - {id: echo, kind: echo}\n")
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), *flags]
    command += ["--db", f"sqlite+aiosqlite:///{tmp_path / 't.db'}"]
    return ServerProcess(command, port, env={"PATH": "/usr/bin:/bin"}, log_path=tmp_path / "serve.log")


def _send(url: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": "hi"}]}},
    }
    headers = {"A2A-Version": "1.0", "traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"}
    with httpx.Client(timeout=10, trust_env=False) as http:
        assert http.post(f"{url}/a2a/agents/echo", json=body, headers=headers).status_code == 200


def test_ranch_serve_writes_one_json_line_per_request_by_default(tmp_path: Path) -> None:
    with _serve(tmp_path) as server:
        _send(server.url)
    records = [json.loads(line) for line in server.output().splitlines() if line.startswith("{")]
    access = [r for r in records if r["logger"] == "ranch.access"]
    assert [r["path"] for r in access if r["trace_id"] == TRACE] == ["/a2a/agents/echo"], access
    assert all(r["logger"] != "uvicorn.access" for r in records)  # uvicorn's own is off


def test_ranch_serve_writes_text_lines_or_none(tmp_path: Path) -> None:
    with _serve(tmp_path / "text", "--log-format", "text") as server:
        _send(server.url)
    lines = [line for line in server.output().splitlines() if f"trace={TRACE}" in line]
    assert len(lines) == 1 and " POST /a2a/agents/echo 200 " in lines[0], server.output()
    with _serve(tmp_path / "off", "--no-access-log") as server:
        _send(server.url)
    assert "ranch.access" not in server.output() and TRACE not in server.output()
