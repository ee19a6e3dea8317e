"""The examples and the README work as shown: each config passes `ranch check`, `my_agent.py` answers
in a real team turn, the examples import only what `ranch` exports; every `ranch` command in the
README parses as written, its quickstart runs end to end, and its a2a-sdk client snippet is a file
that runs."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import re
import shlex
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.types import Task

import ranch
import ranch.client
from _support.hubkit import serve_ranch
from _support.sdk import sdk_client, send, trail_of, user_message
from _support.servers import ServerThread, bind_socket
from ranch.cli import build_parser, main
from ranch.cli.demo import demo_config

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


# -- the README, as a newcomer runs it ------------------------------------------------------------

README = ROOT / "README.md"


def readme_blocks(language: str) -> list[str]:
    """The README's fenced code blocks in `language`, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", README.read_text(), re.MULTILINE | re.DOTALL)


RANCH_LINE = re.compile(r"^([A-Z_]+=\S+\s+)*(\.venv/bin/)?ranch\s")
"""A shell line that runs `ranch`, maybe after variables (`RANCH_DEBUG=1 ranch serve ...`)."""


def readme_commands() -> list[list[str]]:
    """Every `ranch ...` command of the README (its shell blocks' lines, and its prose's code), as
    its arguments."""
    commands = []
    for block in readme_blocks("sh"):
        for line in block.replace("\\\n", " ").splitlines():
            if not RANCH_LINE.match(line):
                continue
            words = shlex.split(line, comments=True)
            while words and "=" in words[0] and not words[0].startswith("-"):
                words = words[1:]  # VAR=value before the command
            if words and words[0] in ("ranch", ".venv/bin/ranch"):
                commands.append(words[1:])
    for inline in re.findall(r"`((?:\.venv/bin/)?ranch [^`]+)`", README.read_text()):  # in the prose
        words = shlex.split(inline)[1:]
        if len(words) > 1:  # a command with its arguments, not a command's name in a sentence
            commands.append(words)
    return commands


def test_every_ranch_command_in_the_readme_is_one_the_cli_takes() -> None:
    """Each command line parses as written (flags, arguments, commands that exist)."""
    commands = readme_commands()
    assert len(commands) > 10 and ["agents", "--skill", "paper"] in commands
    parser = build_parser()
    for words in commands:
        with contextlib.redirect_stdout(io.StringIO()):  # `ranch --version` prints and exits 0
            try:
                parser.parse_args(words)
            except SystemExit as exited:
                assert exited.code == 0, f"README: `ranch {shlex.join(words)}` does not parse"


def test_the_readme_quickstart_runs_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The quickstart's team.yaml, with examples/researcher.py where it says (on a free port here):
    `ranch check` passes, and `ranch send helpdesk "find papers on cats"` completes in three hops."""
    team_yaml = next(block for block in readme_blocks("yaml") if block.startswith("# team.yaml"))
    monkeypatch.setenv("RESEARCH_TOKEN", "change-me")
    researcher_app = examples_module("researcher")
    sock = bind_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = tmp_path / "team.yaml"
    config.write_text(team_yaml.replace("http://127.0.0.1:9001", url))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as checked:
        main(["check", "team.yaml"])
    checked_out = capsys.readouterr()
    assert checked.value.code == 0, checked_out.err
    with (
        ServerThread(researcher_app.build_app(url, "change-me"), sock=sock, name="researcher"),
        serve_ranch(config.read_text(), tmp_path / "t.db") as served,
        pytest.raises(SystemExit) as sent,
    ):
        main(["send", "helpdesk", "find papers on cats", "--url", served.url])
    out = capsys.readouterr().out
    assert sent.value.code == 0, out
    assert out.startswith("Done. Research notes on 'find papers on cats'")
    assert "route: user -> triage -> researcher -> triage -> user" in out


def test_the_researcher_example_asks_for_its_token(monkeypatch: pytest.MonkeyPatch) -> None:
    researcher_app = examples_module("researcher")
    sock = bind_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with ServerThread(researcher_app.build_app(url, "change-me"), sock=sock, name="researcher"):
        card = httpx.get(f"{url}/.well-known/agent-card.json", timeout=10)
        refused = httpx.post(f"{url}/", json={}, timeout=10)
    assert card.status_code == 200 and refused.status_code == 401


def test_the_readme_sdk_client_example_streams_each_hop(tmp_path: Path) -> None:
    """examples/sdk_client.py, the README's a2a-sdk snippet as a file, against the demo team."""
    sdk_client = examples_module("sdk_client")
    with serve_ranch(demo_config(), tmp_path / "t.db") as served:
        lines = anyio.run(sdk_client.ask, served.agent_url("helpdesk"), "find papers on cats")
    assert lines[0].endswith("TASK_STATE_SUBMITTED")
    assert "  TASK_STATE_WORKING: researcher is working (hop 2: needs research)" in lines
    assert lines[-1].startswith("  TASK_STATE_COMPLETED: Here is what the team prepared. Research notes")


def examples_module(name: str) -> Any:
    """examples/NAME.py, imported as the README runs it (`python examples/NAME.py`)."""
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
