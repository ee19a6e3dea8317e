"""The route a turn took: one record per hop, kept in the final task's metadata."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Hop:
    """One hop: `agent` answered a message from `sender` and passed to `recipient`."""

    agent: str
    sender: str
    recipient: str
    reason: str
    ms: float

    def to_json(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "sender": self.sender,
            "recipient": self.recipient,
            "reason": self.reason,
            "ms": self.ms,
        }


def describe(hops: list[Hop], current: str | None = None) -> list[str]:
    """Agent ids in visiting order, including the hop in flight."""
    return [hop.agent for hop in hops] + ([current] if current else [])
