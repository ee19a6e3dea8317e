"""What the next agent sees: the conversation it has not seen yet, as a context part.

Each team conversation (one A2A contextId) keeps a transcript of who said what,
and for each member how far it has read. When a member is called, the entries
it has not seen (bounded by its `history_length`) are rendered into one text
part placed before the content it must answer:

    [ranch] Conversation so far (new to you):
    user: Find recent papers on quantum error correction
    triage: Routing to the researcher.

The part carries `metadata["ranch.context"] = true` so agents can tell it from
the content; ranch's own rules and echo agents ignore it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio
from a2a.types import Part
from google.protobuf.struct_pb2 import Struct

from ranch.agents.base import CONTEXT_PART_KEY

DEFAULT_HISTORY_LENGTH = 20
TRANSCRIPT_LIMIT = 200
"""Entries kept per conversation; older ones are dropped (no member is shown more)."""
HEADER = "[ranch] Conversation so far (new to you):"


@dataclass(frozen=True)
class Entry:
    speaker: str
    text: str


@dataclass
class Conversation:
    """One contextId's state inside one team."""

    entries: list[Entry] = field(default_factory=list)
    dropped: int = 0
    """How many entries were trimmed from the front; positions stay absolute."""
    seen: dict[str, int] = field(default_factory=dict)
    waiting_on: str | None = None
    """The member whose question the caller is answering next, if any."""
    lock: anyio.Lock = field(default_factory=anyio.Lock)

    def add(self, speaker: str, text: str) -> None:
        self.entries.append(Entry(speaker, text))
        excess = len(self.entries) - TRANSCRIPT_LIMIT
        if excess > 0:
            del self.entries[:excess]
            self.dropped += excess

    def unseen(self, member: str, limit: int | None) -> list[Entry]:
        """Entries `member` has not seen, except the newest (the content it gets)."""
        start = max(self.seen.get(member, 0) - self.dropped, 0)
        pending = self.entries[start:-1]
        bound = DEFAULT_HISTORY_LENGTH if limit is None else limit
        return pending[-bound:] if bound else []

    def mark_seen(self, member: str) -> None:
        self.seen[member] = self.dropped + len(self.entries)


def render(entries: list[Entry], header: str = HEADER) -> Part | None:
    """The context part for `entries`, or None when there is nothing new."""
    if not entries:
        return None
    lines = [header, *(f"{entry.speaker}: {entry.text}" for entry in entries)]
    metadata = Struct()
    metadata.update({CONTEXT_PART_KEY: True})
    return Part(text="\n".join(lines), metadata=metadata)
