"""The examples work as shown: each config passes `ranch check`, `my_agent.py` answers in a real team
turn, and they import only what `ranch` exports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from a2a.types import Task

import ranch
import ranch.client
from _support.hubkit import serve_ranch
from _support.sdk import sdk_client, send, trail_of, user_message
from ranch.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"

TEAM = """
agents:
  - id: gatekeeper
    kind: python
    entry: examples.my_agent:Gatekeeper
    client_routing: true
    options: {specialist: researcher}
  - id: researcher
    kind: rules
    rules:
      - {reply: "Research notes: {text}", route: user, reason: done}
teams:
  - {id: desk, members: [gatekeeper, researcher], default_agent: gatekeeper}
"""


@pytest.mark.parametrize("config", sorted(EXAMPLES.glob("*.yaml")), ids=lambda path: path.name)
def test_each_example_config_passes_ranch_check(
    config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-example")  # llm_team.yaml reads it from the environment
    monkeypatch.chdir(ROOT)  # as the README runs it
    with pytest.raises(SystemExit) as exited:
        main(["check", "--strict", str(config.relative_to(ROOT))])  # no routing trap either
    printed = capsys.readouterr()
    assert exited.value.code == 0, printed.err
    assert printed.out.startswith("ok: ")


PUBLIC = {"ranch": ranch.__all__, "ranch.client": ranch.client.__all__}
"""The public packages and what each exports: all an example may import."""


@pytest.mark.parametrize("source", sorted(EXAMPLES.glob("*.py")), ids=lambda path: path.name)
def test_examples_import_only_public_names(source: Path) -> None:
    for node in ast.walk(ast.parse(source.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ranch"):
            public = PUBLIC.get(node.module or "")
            assert public is not None, f"{source.name}:{node.lineno} imports from {node.module}"
            assert {alias.name for alias in node.names} <= set(public)
        if isinstance(node, ast.Import):
            assert not any(alias.name.startswith("ranch.") for alias in node.names), source.name


@pytest.mark.anyio
async def test_my_agent_answers_short_questions_and_routes_long_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(ROOT))  # `entry: examples.my_agent:Gatekeeper`, as run from the repo
    long_question = "Why do otters hold hands while they sleep, and what does the research say? " * 2
    with serve_ranch(TEAM, tmp_path / "t.db") as served:
        async with sdk_client(served.agent_url("desk")) as client:
            (short,) = await send(client, user_message("Hi there"))
            (long,) = await send(client, user_message(long_question))
    assert isinstance(short.task, Task) and isinstance(long.task, Task)
    assert short.task.status.message.parts[0].text == "Short answer: Hi there"
    assert [hop["agent"] for hop in trail_of(short.task)] == ["gatekeeper"]
    assert long.task.status.message.parts[0].text.startswith("Research notes: ")
    assert [(hop["agent"], hop["reason"]) for hop in trail_of(long.task)] == [
        ("gatekeeper", "long question"),
        ("researcher", "done"),
    ]


@pytest.mark.anyio
async def test_the_example_team_answers_a_writing_request_in_three_hops(tmp_path: Path) -> None:
    """examples/team.yaml as a newcomer first runs it: the echo writer's answer goes back to triage,
    which ends the turn (it must not bounce between them until the hop limit or the loop guard)."""
    config = (EXAMPLES / "team.yaml").read_text()  # its remote researcher is not reached by this request
    with serve_ranch(config, tmp_path / "t.db") as served:
        async with sdk_client(served.agent_url("helpdesk")) as client:
            (answer,) = await send(client, user_message("a haiku about otters"))
    assert isinstance(answer.task, Task)
    assert answer.task.status.message.parts[0].text == "Done: Routing to the writer: a haiku about otters"
    assert [(hop["agent"], hop["recipient"]) for hop in trail_of(answer.task)] == [
        ("triage", "writer"),
        ("writer", "triage"),
        ("triage", "user"),
    ]
