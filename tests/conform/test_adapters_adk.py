"""examples/routing_adapters/adk.py: a Google ADK agent served with `to_a2a`, in a ranch team (issue 36,
item 3).

The example's demo `LlmAgent` (with `RoutingToolset`) runs as its own process in `.venv-adk` (google-adk
from PyPI, no ranch; `make adk`), its model ADK's `OpenAILlm` on the suite's scripted chat completions
server. The model is scripted; everything between it and the wire is ADK's and the adapter's: what
the model is shown (the peers, `route_to`'s enum), the tool's refusal of a recipient not offered,
the decision on the reply, and the team's turn that follows it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

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
from _support.fake_openai import FakeOpenAI, route_enum, text, tool
from _support.hubkit import RunningRanch, serve_ranch
from _support.sdk import said, trail_of

pytestmark = needs_venv("adk")

MODEL = "adk-desk"


@pytest.fixture(scope="module")
def desk(provider: tuple[FakeOpenAI, str]) -> Iterator[str]:
    with serve_example(python_of("adk"), "adk", "--model-url", provider[1], "--model", MODEL) as url:
        yield url


@pytest.fixture(scope="module")
def hub(desk: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with serve_ranch(team_with(desk), tmp_path_factory.mktemp("adk") / "r.db") as served:
        yield served


def system_prompt(request: dict[str, Any]) -> str:
    return str(request["messages"][0]["content"])


def test_the_adk_agent_hands_the_turn_to_the_billing_member(hub: RunningRanch, fake: FakeOpenAI) -> None:
    fake.script(
        MODEL, tool("route_to", {"recipient": "billing", "reason": "an invoice"}), text("To billing.")
    )
    task = ask_team(hub.agent_url("team"), "My invoice is wrong, please fix it.")
    assert hops(task) == [("desk", "billing"), ("billing", "user")]
    assert trail_of(task)[0]["reason"] == "an invoice"
    assert said(task) == "Billing fixed the invoice."
    first, after_the_tool = fake.requests_for(MODEL)
    assert route_enum(first) == ["user", "billing"]  # the team's other member; never desk itself
    assert '- "billing": billing' in system_prompt(first)
    assert after_the_tool["messages"][-1]["content"] == json.dumps({"ok": "billing acts next"})


def test_the_adk_agent_answers_the_user(hub: RunningRanch, fake: FakeOpenAI) -> None:
    fake.script(
        MODEL, tool("route_to", {"recipient": "user", "reason": "answered"}), text("We open at nine.")
    )
    task = ask_team(hub.agent_url("team"), "When do you open?")
    assert hops(task) == [("desk", "user")]
    assert said(task) == "We open at nine."


def test_the_adk_agent_passes_every_conformance_scenario(desk: str, fake: FakeOpenAI) -> None:
    """Each scenario's model answer in order. On the last hop the model still names billing:
    `route_to` refuses it, naming the one choice left, and the model then answers the user."""
    fake.script(
        MODEL,
        tool("route_to", {"recipient": "conform-billing", "reason": "an invoice"}),
        text("Billing will fix it."),
        tool("route_to", {"recipient": "user", "reason": "no peer fits"}),
        text("Nobody here does invoices."),
        tool("route_to", {"recipient": "sender", "reason": "returning the map"}),
        text("Back to you."),
        tool("route_to", {"recipient": "conform-billing", "reason": "an invoice"}),
        tool("route_to", {"recipient": "user", "reason": "last hop"}),
        text("Billing cannot be reached now."),
        text("A plain answer."),
    )
    report = conform(desk)
    assert verdicts(report) == dict.fromkeys(SCENARIOS, True), report.to_json()
    requests = fake.requests_for(MODEL)
    refused = requests[7]["messages"][-1]["content"]
    assert json.loads(refused) == {"error": "'conform-billing' cannot act next; choose one of ['user']"}
    plain = requests[-1]
    assert not plain.get("tools") and "route_to" not in system_prompt(plain)  # not negotiated: no peers
