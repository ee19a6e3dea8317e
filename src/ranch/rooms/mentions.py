"""`@id` mentions in message text."""

from __future__ import annotations

import re

MENTION = re.compile(r"(?<![\w@.])@([a-z0-9][a-z0-9_-]*(?:\.[a-z0-9][a-z0-9_-]*)?)")
"""`@id`, or `@org.id` for an organization's own agent in full (a trailing `.` ends the sentence)."""


def mentioned(text: str, explicit: list[str] | None = None) -> list[str]:
    """Ids mentioned in `text` plus the explicit list, first occurrence first, no repeats."""
    found = [*MENTION.findall(text), *(explicit or [])]
    return list(dict.fromkeys(found))
