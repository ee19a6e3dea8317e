"""Where a turn goes: the hop it is about to make (`Way`), and the decision after a hop (`Next`)."""

from __future__ import annotations

from dataclasses import dataclass

from a2a.types import Part


@dataclass(slots=True)
class Way:
    """The hop a turn makes next: to `target`, from `sender`, carrying `parts`, and why."""

    target: str
    reason: str
    sender: str
    parts: list[Part]


@dataclass
class Next:
    """Where the turn goes after a hop."""

    recipient: str
    reason: str
    note: str | None = None
    fallback: bool = False
    """The member's decision was not followed (none, or an invalid one): the Router chose."""
    loop: bool = False
    """The hop repeated an edge with nothing new: `on_loop` chose this."""
    static: bool = False
    """The member decided nothing (or its team returned) and the team's static route chose this."""
