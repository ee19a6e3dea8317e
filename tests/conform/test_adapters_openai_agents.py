"""examples/routing_adapters/openai_agents.py: an OpenAI Agents SDK `Agent` whose handoffs reach its
ranch peers (issue 36, item 3).

The example's demo `Agent` runs as its own process in `.venv-agents` (openai-agents from PyPI, served
with the a2a-sdk, no ranch; `make agents`), its model `OpenAIChatCompletionsModel` on the suite's
scripted chat completions server. The model is scripted; the handoffs it is offered, the run that
stops at a peer's handoff (one model call: the stand-in peer never runs), the decision and the
team's turn that follows are the SDK's and the adapter's.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from _support.adapters import (
    SCENARIOS,
    ask_team,
    conform,
    hops,
    needs_venv,
    python_of,
    serve_example,
    team_with,
    verdicts,
)
from _support.fake_openai import FakeOpenAI, text, tool, tool_names
from _support.hubkit import RunningRanch, serve_ranch
from _support.sdk import said, trail_of

pytestmark = needs_venv("agents")

MODEL = "agents-desk"


@pytest.fixture(scope="module")
def desk(provider: tuple[FakeOpenAI, str]) -> Iterator[str]:
    args = ("--model-url", provider[1], "--model", MODEL)
    with serve_example(python_of("agents"), "openai_agents", *args) as url:
        yield url


@pytest.fixture(scope="module")
def hub(desk: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with serve_ranch(team_with(desk), tmp_path_factory.mktemp("agents") / "r.db") as served:
        yield served


def test_a_handoff_to_a_peer_hands_the_turn_to_the_billing_member(
    hub: RunningRanch, fake: FakeOpenAI
) -> None:
    fake.script(
        MODEL, tool("transfer_to_billing", {"reason": "an invoice"}, content="Passing you to billing.")
    )
    task = ask_team(hub.agent_url("team"), "My invoice is wrong, please fix it.")
    assert hops(task) == [("desk", "billing"), ("billing", "user")]
    first = trail_of(task)[0]
    assert first["reason"] == "an invoice"
    assert first["tokens"] > 0  # the run's usage, reported as the extension's `usage`
    assert said(task) == "Billing fixed the invoice."
    [request] = fake.requests_for(MODEL)  # the run stopped at the handoff: billing runs in ranch
    assert tool_names(request) == ["transfer_to_billing"]


def test_a_final_output_answers_the_user(hub: RunningRanch, fake: FakeOpenAI) -> None:
    fake.script(MODEL, text("We open at nine."))
    task = ask_team(hub.agent_url("team"), "When do you open?")
    assert hops(task) == [("desk", "user")]
    assert said(task) == "We open at nine."
    [request] = fake.requests_for(MODEL)
    assert tool_names(request) == ["transfer_to_billing"]  # offered, not taken


def test_the_agent_passes_every_conformance_scenario(desk: str, fake: FakeOpenAI) -> None:
    """Each scenario's model answer in order; on the last hop the model is offered no handoff at all."""
    fake.script(
        MODEL,
        tool("transfer_to_conform-billing", {"reason": "an invoice"}),
        text("Nobody here does invoices."),
        tool("transfer_back_to_sender", {"reason": "returning the map"}),
        text("Billing cannot be reached now."),
        text("A plain answer."),
    )
    report = conform(desk)
    assert verdicts(report) == dict.fromkeys(SCENARIOS, True), report.to_json()
    offered = [tool_names(request) for request in fake.requests_for(MODEL)]
    assert offered == [
        ["transfer_to_conform-billing", "transfer_to_conform-maps"],
        ["transfer_to_conform-maps"],
        ["transfer_to_conform-billing", "transfer_to_conform-maps", "transfer_back_to_sender"],
        [],  # hopsRemaining 1
        [],  # not negotiated
    ]
