"""A replay as a person reads it: the old and new routes side by side, hop by hop, and where they part."""

from __future__ import annotations

from itertools import zip_longest
from typing import Any

from ranch.replay.compare import same_step
from ranch.replay.player import Replayed

AGENT_WIDTH = 10
REASON_WIDTH = 18


def replay_lines(replayed: Replayed, config_name: str) -> list[str]:
    """The report `ranch replay` prints."""
    turn = replayed.turn
    width = max([len(_cell(hop)) for hop in replayed.old.hops] + [3])
    called = ", ".join(f"{member} ({why})" for member, why in replayed.changed.items())
    how = replayed.mode + (f"; changed: {called}" if replayed.changed else "")
    lines = [
        f"replay of task {turn.task_id} (team {turn.team}) on {config_name}, {how}",
        f"input: {_cut(turn.text, 100)}",
        "",
        f"     {'old':<{width}} | new",
    ]
    number = replayed.diverged_at()
    for index, (old, new) in enumerate(zip_longest(replayed.old.hops, replayed.new.hops), 1):
        mark = "  "
        if old is None or new is None or not same_step(old, new):
            mark = "! " if number is not None and index >= number else "  "
        elif old.get("reason") != new.get("reason"):
            mark = "~ "
        lines.append(f"{mark}{index:>2}. {_cell(old):<{width}} | {_cell(new, source=True)}")
    lines += [
        "",
        f"old route: {replayed.old.line()}   ({replayed.old.summary()})",
        f"new route: {replayed.new.line()}   ({replayed.new.summary()})",
    ]
    if replayed.new.stopped:
        lines.append(f"replay stopped at hop {len(replayed.new.hops) + 1}: {replayed.new.stopped}")
    elif replayed.new.error:
        lines.append(f"new turn failed: {replayed.new.error}")
    lines.append(replayed.divergence())
    calls = f"called: {', '.join(replayed.called) or 'none'}"
    if replayed.mode == "recorded":
        calls += f"; recorded answers given back: {', '.join(replayed.given_back) or 'none'}"
    lines.append(calls)
    return lines


def _cell(hop: dict[str, Any] | None, *, source: bool = False) -> str:
    """One hop: agent -> recipient, why, time, tokens (and, replayed, whether it was recorded)."""
    if hop is None:
        return ""
    cost = f" {int(hop['tokens'])} tok" if hop.get("tokens") is not None else ""
    cell = (
        f"{hop['agent']:<{AGENT_WIDTH}} -> {hop['recipient']:<{AGENT_WIDTH}} "
        f"{_cut(str(hop['reason']), REASON_WIDTH):<{REASON_WIDTH}} {float(hop['ms']):>7.1f} ms{cost}"
    )
    if source and hop.get("source"):
        cell += f"  {hop['source']}"
    return cell


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
