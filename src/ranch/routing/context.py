"""What the next agent sees: the conversation it has not seen yet, as a context part.

Each team conversation (one owner's A2A contextId) keeps a transcript of who said
what, and for each member how far it has read; transcripts are bounded in entries
and in bytes, per conversation and for all of a team's conversations together.
When a member is called, the entries it has not seen (bounded by its
`history_length`) are rendered into one text part placed before the content it
must answer:

    [ranch] Conversation so far (new to you):
    user: Find recent papers on quantum error correction
    triage: Routing to the researcher.

The part carries `metadata["ranch.context"] = true` so agents can tell it from
the content; ranch's own rules and echo agents ignore it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from a2a.types import Part
from google.protobuf.struct_pb2 import Struct

from ranch.agents.base import CONTEXT_PART_KEY
from ranch.utils.lru import Lru

if TYPE_CHECKING:  # the database layer loads with the server, not with `import ranch`
    from ranch.db.conversations import ConversationStore

DEFAULT_HISTORY_LENGTH = 20
TRANSCRIPT_LIMIT = 200
"""Entries kept per conversation; older ones are dropped (no member is shown more)."""
TRANSCRIPT_BYTES = 1_000_000
"""Bytes of text kept per conversation: the oldest entries go first; an entry larger than this is
kept cut to it, so the newest always stays."""
CONVERSATIONS_BYTES = 64_000_000
"""Bytes of text kept for all conversations of one team: the least recently used go first."""
MAX_CONVERSATIONS = 10_000
"""Conversations kept per team; the least recently used go first."""
HEADER = "[ranch] Conversation so far (new to you):"
CUT = " …[cut: {0} bytes more]"


@dataclass(frozen=True)
class Entry:
    speaker: str
    text: str
    size: int = 0
    """UTF-8 bytes of speaker and text, counted once when it joins a transcript."""


@dataclass(eq=False)
class Conversation:
    """One owner's contextId inside one team."""

    entries: list[Entry] = field(default_factory=list)
    dropped: int = 0
    """How many entries were trimmed from the front; positions stay absolute."""
    seen: dict[str, int] = field(default_factory=dict)
    waiting_on: str | None = None
    """The member whose question the caller is answering next, if any."""
    pending: dict[str, Any] | None = None
    """A hop waiting for a person's approval: {member, reason, sender, asker (the caller who caused it,
    as `Caller.to_json`; None: anonymous), approvers, parts (A2A JSON), trail}."""
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    size: int = 0
    """UTF-8 bytes held by `entries`."""
    max_bytes: int = TRANSCRIPT_BYTES
    resized: Callable[[Conversation, int], None] | None = field(default=None, repr=False)
    """Told how many bytes this conversation grew or shrank by (its team's `Conversations`)."""
    version: int = 0
    """The turns that wrote it to the database (0: never stored); a newer stored one is read again."""
    known: bool = False
    """Its stored state was read (or there was none) since this process began holding it."""

    def state(self) -> dict[str, Any]:
        """What the database keeps of it (JSON)."""
        return {
            "entries": [[entry.speaker, entry.text] for entry in self.entries],
            "dropped": self.dropped,
            "seen": dict(self.seen),
            "waiting_on": self.waiting_on,
            "pending": self.pending,
        }

    def restore(self, version: int, state: dict[str, Any]) -> None:
        """Take the stored `state` (written by another process) in place of what is held here."""
        entries = [Entry(str(speaker), str(text)) for speaker, text in state.get("entries", [])]
        self.entries = [Entry(e.speaker, e.text, len(e.speaker) + len(e.text.encode())) for e in entries]
        self.dropped = int(state.get("dropped", 0))
        self.seen = {str(member): int(read) for member, read in dict(state.get("seen", {})).items()}
        waiting = state.get("waiting_on")
        self.waiting_on = str(waiting) if waiting else None
        pending = state.get("pending")
        self.pending = dict(pending) if isinstance(pending, dict) else None
        self.version = version
        size, self.size = self.size, sum(entry.size for entry in self.entries)
        if self.resized is not None:
            self.resized(self, self.size - size)

    def add(self, speaker: str, text: str) -> None:
        size = len(speaker) + len(text.encode())
        if size > self.max_bytes:
            text = _cut(text, self.max_bytes - len(speaker))
            size = len(speaker) + len(text.encode())
        self.entries.append(Entry(speaker, text, size))
        grown = size
        excess = len(self.entries) - TRANSCRIPT_LIMIT
        while excess > 0 or (self.size + grown > self.max_bytes and len(self.entries) > 1):
            grown -= self.entries[0].size
            del self.entries[0]
            self.dropped += 1
            excess -= 1
        self.size += grown
        if self.resized is not None:
            self.resized(self, grown)

    def unseen(self, member: str, limit: int | None) -> list[Entry]:
        """Entries `member` has not seen, except the newest (the content it gets)."""
        start = max(self.seen.get(member, 0) - self.dropped, 0)
        pending = self.entries[start:-1]
        bound = DEFAULT_HISTORY_LENGTH if limit is None else limit
        return pending[-bound:] if bound else []

    def mark_seen(self, member: str) -> None:
        self.seen[member] = self.dropped + len(self.entries)


class Conversations:
    """One team's conversations by (owner, contextId), bounded in number and in bytes.

    The least recently used go first; a conversation in the middle of a turn (its lock held) is
    never dropped, so two messages in one context still take turns.
    """

    def __init__(
        self,
        max_count: int = MAX_CONVERSATIONS,
        max_bytes: int = CONVERSATIONS_BYTES,
        per_conversation: int = TRANSCRIPT_BYTES,
    ) -> None:
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.per_conversation = min(per_conversation, max_bytes)
        self._items: Lru[tuple[str, str], Conversation] = Lru(
            max_count, max_bytes, keep=_in_a_turn, dropped=_detached
        )
        """The least recently used go first, each in O(1): the cost of a turn must not grow with the
        conversations held. One in the middle of a turn is in use: it moves to the newest end instead
        of going (at most one pass, so all of them in use ends the loop)."""
        self.store: ConversationStore | None = None
        """Where each conversation is kept between turns (the hub's database); None: memory only."""

    async def refresh(self, team_id: str, owner: str, context_id: str, conversation: Conversation) -> None:
        """Before a turn: read the stored conversation when this process does not hold it yet, or
        (with replicas) when another process stored a newer version of it."""
        store = self.store
        if store is None or (conversation.known and not store.shared):
            return
        if not store.may_hold(team_id, owner, context_id):  # never stored: nothing to read
            conversation.known = True
            return
        if conversation.known and await store.version(team_id, owner, context_id) == conversation.version:
            return
        stored = await store.load(team_id, owner, context_id)
        if stored is not None:
            conversation.restore(*stored)
        conversation.known = True

    async def persist(self, team_id: str, owner: str, context_id: str, conversation: Conversation) -> None:
        """After a turn: store the conversation as its next version."""
        if self.store is None:
            return
        conversation.version += 1
        await self.store.save(team_id, owner, context_id, conversation.version, conversation.state())

    def get(self, owner: str, context_id: str) -> Conversation:
        """The conversation of `owner` on `context_id`, created on first use, now the most recent."""
        key = (owner, context_id)
        conversation = self._items.get(key)
        if conversation is None:
            conversation = Conversation(max_bytes=self.per_conversation)
            conversation.resized = lambda _, grown: self._items.grew(key, grown)
            self._items.put(key, conversation, conversation.size)
        else:
            self._items.trim()
        return conversation

    @property
    def size(self) -> int:
        """UTF-8 bytes held by all conversations."""
        return self._items.size

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        for conversation in self._items.values():
            conversation.resized = None
        self._items.clear()


def _in_a_turn(conversation: Conversation) -> bool:
    return conversation.lock.locked()


def _detached(_: tuple[str, str], conversation: Conversation) -> None:
    """A conversation let go tells its team no more of its size."""
    conversation.resized = None


def _cut(text: str, limit: int) -> str:
    """`text` within `limit` UTF-8 bytes, marker included."""
    data = text.encode()
    marker = CUT.format(len(data))
    keep = max(limit - len(marker.encode()), 0)
    return data[:keep].decode(errors="ignore") + marker


def render(entries: list[Entry], header: str = HEADER) -> Part | None:
    """The context part for `entries`, or None when there is nothing new."""
    if not entries:
        return None
    lines = [header, *(f"{entry.speaker}: {entry.text}" for entry in entries)]
    metadata = Struct()
    metadata.update({CONTEXT_PART_KEY: True})
    return Part(text="\n".join(lines), metadata=metadata)
