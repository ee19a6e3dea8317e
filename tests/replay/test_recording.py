"""What a recorded hop says the member decided: the Router's own choices are left for the new team's
Router to make again (src/ranch/replay/recording.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ranch.replay.recording import ASKED, ROUTER_CHOSE, RecordedHop
from ranch.wire.client_routing import RoutingDecision

ROUTER = Path(__file__).resolve().parents[2] / "src" / "ranch" / "routing" / "router.py"


def hop(reason: str, recipient: str = "triage", loop: bool = False) -> RecordedHop:
    return RecordedHop(agent="researcher", sender="triage", recipient=recipient, reason=reason, loop=loop)


@pytest.mark.parametrize(
    ("record", "decided"),
    [
        (hop("back with notes"), RoutingDecision(recipient="triage", reason="back with notes")),
        (hop("static route", "editor"), None),
        (hop("no decision; back to the default agent"), None),
        (hop(ASKED, "user"), None),
        (hop("loop: triage -> researcher -> triage x3", "user", loop=True), None),
        (hop("invalid recipient 'billing', fallback"), RoutingDecision(recipient="billing")),
        (hop("finance is closed to the caller"), RoutingDecision(recipient="finance")),
        (
            hop("to ops, outside desk: needs a person", "user"),
            RoutingDecision(recipient="ops", reason="needs a person"),
        ),
    ],
    ids=["decided", "static", "fallback", "asked", "loop", "invalid", "closed", "outside"],
)
def test_a_recorded_hop_gives_back_what_its_member_decided(
    record: RecordedHop, decided: RoutingDecision | None
) -> None:
    assert record.decision() == decided


def test_the_routers_own_reasons_are_the_routers() -> None:
    """A reason the Router stops giving would be replayed as a member's decision: keep them in step."""
    source = ROUTER.read_text()
    assert [reason for reason in sorted(ROUTER_CHOSE | {ASKED}) if f'"{reason}"' not in source] == []
