"""Logs: one JSON object per line, a trace id on each, and personal data scrubbed from every record.

`configure_logging` puts one handler on the root logger with `JsonFormatter` and
`PiiScrubber`, so every record (ranch's, uvicorn's, the a2a-sdk's) leaves the
process scrubbed. The scrubber replaces emails, phone numbers, API keys and
tokens (known prefixes, ranch's own `rk_` keys, JWTs, `Bearer …`, `token=…`-style
pairs) and card numbers (Luhn-checked) with `[email]`, `[phone]`, `[secret]` and
`[card]`. Each field of a record is cut to `MAX_FIELD_CHARS` first (a marker says
how much was left out), and every pattern is linear, so no record can hold the
event loop for long, whatever a caller put in it.

`RANCH_DEBUG=1` (or `PROTOCOL_DEBUG=1`) turns on debug mode: DEBUG level, and
the bindings log the start of each request's body, its answer and timing; still scrubbed.

`AccessLog` is `ranch serve`'s access log (uvicorn's is off): one line per request,
formatted once and written with one call, without a LogRecord; a path is scrubbed only
when it can hold something to scrub. Lines and records are JSON, or text for a person
(`TextFormatter`) when the stream is a terminal or `--log-format text` asks.
"""

from __future__ import annotations

import json
import logging
import os
import re
import select
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Literal, Self, TextIO

import anyio
from anyio import TASK_STATUS_IGNORED
from anyio.abc import TaskGroup, TaskStatus

from ranch.ids import random_hex

DEBUG_VARIABLES = ("RANCH_DEBUG", "PROTOCOL_DEBUG")
TRACE_ID: ContextVar[str] = ContextVar("ranch_trace_id", default="")
"""The trace id of the request or run being served; every log record carries it."""


def debug_enabled(environ: dict[str, str] | None = None) -> bool:
    """Whether `RANCH_DEBUG` or its alias `PROTOCOL_DEBUG` is set to a true value."""
    env = os.environ if environ is None else environ
    return any(env.get(name, "").strip().lower() in ("1", "true", "yes", "on") for name in DEBUG_VARIABLES)


def new_trace_id() -> str:
    """32 random hex digits, from ranch's pooled randomness (no system call per request)."""
    return random_hex()


def trace_id_from(traceparent: str | None) -> str:
    """The trace id of a W3C `traceparent` header (`00-<32 hex>-<16 hex>-<2 hex>`), else a new one."""
    if traceparent:
        parts = traceparent.strip().split("-")
        if len(parts) == 4 and len(parts[1]) == 32 and all(c in "0123456789abcdef" for c in parts[1]):
            return parts[1]
    return new_trace_id()


@contextmanager
def traced(trace_id: str | None = None) -> Iterator[str]:
    """Run the block under `trace_id` (a new one when None)."""
    value = trace_id or new_trace_id()
    token = TRACE_ID.set(value)
    try:
        yield value
    finally:
        TRACE_ID.reset(token)


# -- scrubbing ----------------------------------------------------------------------------------
#
# `scrub` runs on every record, on the event loop, over text a caller controls (a URL path, a
# body in debug mode, an SDK's error message quoting a field). Each pattern is linear in the
# text: every repeat is bounded, a run that cannot be followed by what comes next is matched
# possessively (`{m,n}+`, so a failed match gives nothing back to retry), and patterns that
# could start anywhere inside a long run start only where the run starts (a lookbehind).
# tests/policy/test_logs.py checks that no pattern has an unbounded repeat.

MAX_FIELD_CHARS = 16_384
"""Longest text scrubbed and written per record field (message, each string extra, exception
text); the rest is left out, and a marker says how much."""
_TAIL_SEARCH = 256
"""How far back from the cut `clip` looks for whitespace, so no half of a token is kept."""


@dataclass(frozen=True)
class _Rule:
    """One kind of personal data: where it can be, what finds it, what replaces it."""

    pattern: re.Pattern[str]
    replacement: str | Callable[[re.Match[str]], str]
    hints: tuple[str, ...] = ()
    """The pattern can only match text holding one of these (none: always try it)."""
    folded: bool = False
    """The hints are lower case and looked for in the lower-cased text (case-insensitive patterns)."""

    def may_match(self, text: str) -> bool:
        if not self.hints:
            return True
        haystack = text.lower() if self.folded else text
        return any(hint in haystack for hint in self.hints)


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group())
    return "[card]" if 13 <= len(digits) <= 19 and _luhn(digits) else match.group()


_KEY_NAMES = (
    r"(?:x-)?(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|client[_-]?secret|password"
    r"|passwd|credentials|x-a2a-notification-token|authorization)"
)
_RULES = (
    # JWT: three base64url segments
    _Rule(
        re.compile(r"(?<![\w-])eyJ[A-Za-z0-9_-]{5,8192}+\.[A-Za-z0-9_-]{5,8192}+\.[A-Za-z0-9_-]{0,8192}+"),
        "[secret]",
        ("eyJ",),
    ),
    # OpenAI-style keys (sk-…, sk-proj-…)
    _Rule(
        re.compile(r"(?<![\w-])(?:sk|pk|rk)-(?:[A-Za-z0-9]{1,64}+-){0,8}[A-Za-z0-9_]{16,256}"),
        "[secret]",
        ("sk-", "pk-", "rk-"),
    ),
    # ranch's own keys: rk_ + 32 url-safe characters (rooms/agents.py issue_key)
    _Rule(re.compile(r"(?<![\w-])rk_[A-Za-z0-9_-]{16,256}"), "[secret]", ("rk_",)),
    _Rule(re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,255}"), "[secret]", ("gh",)),  # GitHub
    _Rule(re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,255}"), "[secret]", ("xox",)),  # Slack
    _Rule(re.compile(r"\bAKIA[0-9A-Z]{16}\b"), "[secret]", ("AKIA",)),  # AWS access key id
    _Rule(re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"), "[secret]", ("AIza",)),  # Google API key
    # Bearer / Basic / Token credentials
    _Rule(
        re.compile(r"(?i)\b(bearer|basic|token)(\s{1,16}+)[A-Za-z0-9._~+/=-]{8,8192}"),
        r"\1\2[secret]",
        ("bearer", "basic", "token"),
        folded=True,
    ),
    # token=…, "api_key": "…", password: …, Authorization: …
    _Rule(
        re.compile(
            rf"(?i)\b({_KEY_NAMES}[\"']?\s{{0,16}}+[:=]\s{{0,16}}+[\"']?)((?!\[secret\])[^\s\"',;&}}]{{4,8192}})"
        ),
        r"\1[secret]",
        ("key", "token", "secret", "passw", "credentials", "authorization"),
        folded=True,
    ),
    # e-mail: a local part of at most 64 characters, up to 8 domain labels of at most 63
    _Rule(
        re.compile(r"[A-Za-z0-9._%+-]{1,64}+@(?:[A-Za-z0-9-]{1,63}+\.){1,8}[A-Za-z]{2,63}"),
        "[email]",
        ("@",),
    ),
    # card numbers: 13-19 digits, spaces or dashes between, Luhn-checked in `_card`
    _Rule(re.compile(r"(?<![\w-])(?:\d[ -]?){12,18}\d(?![\w-])"), _card),
    # phones: +44 20 7946 0958
    _Rule(re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,4}+\)?){2,5}(?![\w-])"), "[phone]", ("+",)),
    # (555) 123-4567
    _Rule(re.compile(r"(?<!\w)\(\d{3}\)\s?\d{3}[ .-]\d{4}(?!\w)"), "[phone]", ("(",)),
    # 555-123-4567, 555.123.4567, 555 123 4567 (not inside a longer run of numbers: 1.555.123.4567.8)
    _Rule(re.compile(r"(?<!\w)(?<!\d[.-])\d{3}[ .-]\d{3}[ .-]\d{4}(?!\w|[.-]\d)"), "[phone]"),
    # 5551234567: ten digits, the first 2-9 (so Unix times in seconds, 1…, are left alone)
    _Rule(re.compile(r"(?<!\w)(?<!\d[.-])[2-9]\d{9}(?!\w|[.-]\d)"), "[phone]"),
)
PATTERNS = tuple(rule.pattern for rule in _RULES)
"""Every pattern `scrub` applies, in order."""


def scrub(text: str) -> str:
    """`text` with emails, phone numbers, keys and tokens, and card numbers replaced."""
    for rule in _RULES:
        if rule.may_match(text):
            text = rule.pattern.sub(rule.replacement, text)
    return text


def clip(text: str, limit: int = MAX_FIELD_CHARS) -> tuple[str, str]:
    """`text` cut to at most `limit` characters, and the marker saying what was cut ("" if nothing).

    The cut goes back to the last whitespace near the limit, so a key or an address cut in two
    is left out rather than half-kept where the scrubber can no longer recognise it.
    """
    if len(text) <= limit:
        return text, ""
    head = text[:limit]
    space = max(head.rfind(" ", limit - _TAIL_SEARCH), head.rfind("\n", limit - _TAIL_SEARCH))
    if space > 0:
        head = head[:space]
    return head, f"…[truncated {len(text) - len(head)} chars]"


def scrub_field(text: str, limit: int = MAX_FIELD_CHARS) -> str:
    """`text` clipped to `limit` characters (with a marker), then scrubbed: what a log record holds."""
    head, marker = clip(text, limit)
    return scrub(head) + marker


def prefix(body: bytes, limit: int) -> str:
    """At most `limit` bytes of `body` as text, and a marker with the size of what was left out."""
    shown = body[:limit].decode(errors="replace")
    return shown if len(body) <= limit else f"{shown}…[truncated {len(body) - limit} bytes]"


class PiiScrubber(logging.Filter):
    """Scrubs each record's message, arguments and exception text before any handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub_field(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub_field(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub_field(record.stack_info)
        for key, value in _extras(record).items():
            if isinstance(value, str):
                setattr(record, key, scrub_field(value))
        if not getattr(record, "trace_id", ""):
            record.trace_id = TRACE_ID.get()
        return True


# -- formatting ---------------------------------------------------------------------------------

_STANDARD = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


_NOT_EMITTED = frozenset({"trace_id", "color_message"})
"""Extras a record carries but a JSON line leaves out: the trace id has its own field, and
uvicorn's `color_message` repeats the message with terminal colour codes."""


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {key: value for key, value in record.__dict__.items() if key not in _STANDARD}


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, trace id, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "trace_id": getattr(record, "trace_id", "") or TRACE_ID.get(),
        }
        for key, value in _extras(record).items():
            if key not in _NOT_EMITTED:
                entry[key] = value
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        return json.dumps(entry, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """One line a person reads: local time, level, logger, message, trace id; the exception below."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s.%(msecs)03d %(levelname)-7s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        trace_id = getattr(record, "trace_id", "") or TRACE_ID.get()
        if not trace_id:
            return line
        head, newline, rest = line.partition("\n")
        return f"{head} trace={trace_id}{newline}{rest}"


LogFormat = Literal["auto", "json", "text"]
"""`auto`: text when the stream is a terminal, else JSON."""
HANDLER_NAME = "ranch"


def configure_logging(
    *,
    debug: bool | None = None,
    level: str | int = "INFO",
    stream: TextIO | None = None,
    format: LogFormat = "json",
) -> logging.StreamHandler[TextIO]:
    """One scrubbing handler on the root logger (replacing a previous one), JSON or text; returns it."""
    debug = debug_enabled() if debug is None else debug
    root = logging.getLogger()
    for existing in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(existing)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(HANDLER_NAME)
    text = format == "text" or (format == "auto" and _is_terminal(handler.stream))
    handler.setFormatter(TextFormatter() if text else JsonFormatter())
    handler.addFilter(PiiScrubber())
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else level if isinstance(level, int) else level.upper())
    return handler


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


# -- the access log -----------------------------------------------------------------------------

ACCESS_LOGGER = "ranch.access"
"""The `logger` an access line names, like a record's."""


def _care_pattern() -> re.Pattern[str]:
    """What a path must hold before it needs more than copying into a line: a character JSON or a
    terminal must not get as is, or the start of anything a scrubbing rule could replace (its hints;
    for the rules without hints, three digits in a row, as every number they replace has)."""
    plain = sorted({hint for rule in _RULES if not rule.folded for hint in rule.hints})
    folded = sorted({hint for rule in _RULES if rule.folded for hint in rule.hints})
    parts = [r'[\x00-\x1f\x7f"\\]', r"\d[ -]?\d[ -]?\d", *map(re.escape, plain)]
    parts.append(f"(?i:{'|'.join(map(re.escape, folded))})")
    return re.compile("|".join(parts))


NEEDS_CARE = _care_pattern()
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_JSON_LINE = (
    '{"time": "%s.%03d+00:00", "level": "info", "logger": "' + ACCESS_LOGGER + '", '
    '"message": "%s %s %d", "trace_id": "%s", "method": "%s", "path": "%s", "status": %d, '
    '"duration_ms": %.2f, "client": "%s"}\n'
)
_TEXT_LINE = "%s.%03d %s %s %s %d %.2fms trace=%s\n"


PATHS_KEPT = 4096
"""Paths whose line-ready form an access log keeps (most requests repeat a few agent URLs)."""
_KEPT_PATH_CHARS = 256
PENDING_BYTES = select.PIPE_BUF
"""The most an access log writes at once: a pipe takes a write this size whole, so the lines of
several processes sharing one (`ranch serve --workers`) never interleave mid-line."""


class AccessLog:
    """One line per request, formatted once; no LogRecord, no filter.

    A path goes into the line as it is unless `NEEDS_CARE` finds something in it; only those
    are clipped, scrubbed and escaped like a record's fields. The line-ready form of each short
    path is kept (a few thousand; all dropped when full), and the time of day is formatted once
    per second. When the stream has a file descriptor and the log is entered (`async with`, as the
    hub's lifespan does), the lines of one event-loop tick go to it in one `os.write` at the end of
    that tick, by a writer task the log owns (under load, many requests end in one tick, and a
    system call per line was most of the log's cost); else each goes out as it is made.
    """

    def __init__(self, stream: TextIO, *, json: bool = True) -> None:
        self.json = json
        self._stream = stream
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):  # StringIO and the like
            self._fd = None
        self._paths: dict[str, str] = {}
        self._second = -1
        self._stamp = ""
        self._pending: list[bytes] = []
        """Lines of this event-loop tick, not written yet (`flush` writes them)."""
        self._pending_bytes = 0
        self._group: TaskGroup | None = None
        self._lines: anyio.Event | None = None
        """Set by a tick's first line: the writer task writes them when it wakes, after that tick."""

    async def __aenter__(self) -> Self:
        if self._group is None:  # (entered once: a second hub sharing the log leaves it to the first)
            group = anyio.create_task_group()
            await group.__aenter__()
            self._group = group
            self._lines = anyio.Event()
            await group.start(self._write_ticks)  # waiting for a tick's lines before a request ends
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        group, self._group, self._lines = self._group, None, None
        if group is not None:
            group.cancel_scope.cancel()
            await group.__aexit__(None, None, None)
        self.flush()

    async def _write_ticks(self, *, task_status: TaskStatus[None] = TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while self._lines is not None:
            await self._lines.wait()
            self._lines = anyio.Event()
            self.flush()

    @classmethod
    def on(cls, handler: logging.StreamHandler[TextIO]) -> AccessLog:
        """An access log writing to `handler`'s stream, in its format."""
        return cls(handler.stream, json=not isinstance(handler.formatter, TextFormatter))

    def __call__(
        self, method: str, path: str, query: bytes, status: int, seconds: float, trace_id: str, client: str
    ) -> None:
        if query:
            path = f"{path}?{query.decode('latin-1')}"
        shown = self._paths.get(path)
        if shown is None:
            shown = self._shown(path)
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._stamp = (
                time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
                if self.json
                else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
            )
        millis, took = int((now - second) * 1000), seconds * 1000
        if self.json:
            line = _JSON_LINE % (
                self._stamp, millis, method, shown, status, trace_id, method, shown, status, took, client
            )  # fmt: skip
        else:
            line = _TEXT_LINE % (self._stamp, millis, client, method, shown, status, took, trace_id)
        if self._fd is None:
            self._stream.write(line)
            return
        data = line.encode(errors="backslashreplace")
        if self._pending_bytes + len(data) > PENDING_BYTES:
            self.flush()
        self._pending.append(data)
        self._pending_bytes += len(data)
        if self._lines is None or self._group is None:  # not entered: no writer task to wait for
            self.flush()
        elif len(self._pending) == 1:  # the tick's first line: the writer writes them all after the tick
            self._lines.set()

    def flush(self) -> None:
        """Write the pending lines now, in one call."""
        if self._pending and self._fd is not None:
            lines, self._pending, self._pending_bytes = self._pending, [], 0
            os.write(self._fd, b"".join(lines))

    def _shown(self, path: str) -> str:
        """`path` as a line holds it: as it is, or clipped, scrubbed and escaped; kept when short."""
        shown = path
        if len(path) > MAX_FIELD_CHARS or NEEDS_CARE.search(path):
            shown = scrub_field(path)
            if self.json:
                shown = json.dumps(shown, ensure_ascii=False)[1:-1]
            else:
                shown = _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", shown)
        if len(path) <= _KEPT_PATH_CHARS:
            if len(self._paths) >= PATHS_KEPT:
                self._paths.clear()
            self._paths[path] = shown
        return shown
