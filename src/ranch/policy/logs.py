"""Logs: one JSON object per line, a trace id on each, and personal data scrubbed from every record.

`configure_logging` puts one handler on the root logger with `JsonFormatter` and
`PiiScrubber`, so every record (ranch's, uvicorn's, the a2a-sdk's) leaves the
process scrubbed. The scrubber replaces emails, phone numbers, API keys and
tokens (known prefixes, JWTs, `Bearer …`, `token=…`-style pairs) and card
numbers (Luhn-checked) with `[email]`, `[phone]`, `[secret]` and `[card]`.

`RANCH_DEBUG=1` (or `PROTOCOL_DEBUG=1`) turns on debug mode: DEBUG level, and
the bindings log each request's full body and timing; still scrubbed.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, TextIO

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

_SECRET_PATTERNS = [
    re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"),  # JWT
    re.compile(r"\b(?:sk|pk|rk)-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{16,}"),  # OpenAI-style keys
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),  # Slack
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),  # Google API key
]
_AUTH_SCHEME = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}")
_KEY_VALUE = re.compile(
    r"(?i)\b((?:x-)?(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|client[_-]?secret|password"
    r"|passwd|credentials|x-a2a-notification-token|authorization)[\"']?\s*[:=]\s*[\"']?)"
    r"((?!\[secret\])[^\s\"',;&}]{4,})"
)
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<![\w-])(?:\d[ -]?){12,18}\d(?![\w-])")
_PHONES = [
    re.compile(r"(?<![\w+])\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){2,5}(?![\w-])"),  # +44 20 7946 0958
    re.compile(r"(?<!\w)\(\d{3}\)\s?\d{3}[ .-]\d{4}(?!\w)"),  # (555) 123-4567
    re.compile(r"(?<![\w.-])\d{3}[.-]\d{3}[.-]\d{4}(?![\w.-])"),  # 555-123-4567
]


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


def scrub(text: str) -> str:
    """`text` with emails, phone numbers, keys and tokens, and card numbers replaced."""
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub("[secret]", text)
    text = _AUTH_SCHEME.sub(r"\1\2[secret]", text)
    text = _KEY_VALUE.sub(r"\1[secret]", text)
    text = _EMAIL.sub("[email]", text)
    text = _CARD.sub(_card, text)
    for pattern in _PHONES:
        text = pattern.sub("[phone]", text)
    return text


class PiiScrubber(logging.Filter):
    """Scrubs each record's message, arguments and exception text before any handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = scrub(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text)
        if record.stack_info:
            record.stack_info = scrub(record.stack_info)
        for key, value in _extras(record).items():
            if isinstance(value, str):
                setattr(record, key, scrub(value))
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


HANDLER_NAME = "ranch"


def configure_logging(
    *, debug: bool | None = None, level: str | int = "INFO", stream: TextIO | None = None
) -> logging.Handler:
    """One scrubbing JSON handler on the root logger (replacing a previous one); returns it."""
    debug = debug_enabled() if debug is None else debug
    root = logging.getLogger()
    for existing in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(existing)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(PiiScrubber())
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else level if isinstance(level, int) else level.upper())
    return handler
