"""The command line as a newcomer uses it: `ranch serve` (demo), `ranch send`, `ranch check`."""

from __future__ import annotations

import re
import time
from pathlib import Path

import httpx

from _support.hubkit import wait_until
from _support.servers import Run, ServerProcess, free_port
from ranch.db import migrate


def test_serve_prints_what_it_serves_and_how_to_try_it(demo: ServerProcess) -> None:
    output = demo.output()
    assert "ranch is serving the built-in demo" in output
    assert f"{demo.url}/a2a/agents/helpdesk" in output
    assert 'try: ranch send helpdesk "find papers on quantum error correction"' in output


def test_the_demo_room_answers_a_posted_message(demo: ServerProcess) -> None:
    output = demo.output()
    assert "demo room 'demo' is ready; sign in with the API key rk_demo" in output
    assert "its API key (shown once): rk_" in output  # the bootstrap admin's key, printed once
    assert "-H 'X-API-Key: rk_demo'" in output and f"{demo.url}/api/v1/rooms/demo/messages" in output
    headers = {"X-API-Key": "rk_demo"}
    messages = f"{demo.url}/api/v1/rooms/demo/messages"
    posted = httpx.post(messages, json={"text": "@helpdesk find papers on A2A"}, headers=headers, timeout=10)
    assert posted.status_code == 201, posted.text

    def answered() -> list[str]:
        items = httpx.get(
            messages, params={"since": posted.json()["cursor"]}, headers=headers, timeout=10
        ).json()
        return [f"{m['sender']['id']}: {m['text']}" for m in items["items"]]

    deadline = time.monotonic() + 15
    while not any(line.startswith("triage: Here is what the team prepared") for line in answered()):
        assert time.monotonic() < deadline, f"the demo team did not answer: {answered()}"
        time.sleep(0.1)
    assert [line.split(":")[0] for line in answered()] == ["triage", "researcher", "triage"]


def test_db_upgrade_creates_the_schema_and_reports_it(tmp_path: Path, ranch: Run) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    upgraded = ranch("db", "upgrade", "--db", url)
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"empty -> {migrate.head()}" in upgraded.stdout
    current = ranch("db", "current", "--db", url)
    assert f"at {migrate.head()}; up to date" in current.stdout


def test_send_prints_the_reply_and_the_route(demo: ServerProcess, ranch: Run) -> None:
    result = ranch("send", "helpdesk", "find papers on quantum error correction", "--url", demo.url)
    assert result.returncode == 0, result.stderr
    assert "Research notes on 'find papers on quantum error correction'" in result.stdout
    assert "route: user -> triage -> researcher -> triage -> user" in result.stdout
    assert "| completed" in result.stdout
    trace = re.search(r"\| trace ([0-9a-f]{32})$", result.stdout, re.MULTILINE)
    assert trace is not None, result.stdout
    wait_until(lambda: trace.group(1) in demo.output(), what="the server's access line with the trace id")


def test_send_stream_prints_each_hop_before_the_answer(demo: ServerProcess, ranch: Run) -> None:
    result = ranch("send", "helpdesk", "write a note about the offsite", "--url", demo.url, "--stream")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    hops = [line for line in lines if line.startswith("-> ")]
    assert [hop.split()[1] for hop in hops] == ["triage", "writer", "triage"]
    assert lines.index(hops[-1]) < next(i for i, line in enumerate(lines) if line.startswith("route:"))


def test_send_continues_a_conversation_with_context(demo: ServerProcess, ranch: Run) -> None:
    first = ranch("send", "helpdesk", "find papers on cats", "--url", demo.url)
    context = first.stdout.rsplit("| context ", 1)[1].split(" |", 1)[0]
    second = ranch("send", "helpdesk", "write a note about cats", "--url", demo.url, "--context", context)
    assert second.returncode == 0, second.stderr
    assert f"| context {context} |" in second.stdout


def test_send_to_an_unknown_agent_says_so(demo: ServerProcess, ranch: Run) -> None:
    result = ranch("send", "nobody", "hi", "--url", demo.url)
    assert result.returncode == 2
    assert "no agent or team 'nobody'" in result.stderr


def test_send_without_a_server_says_so(ranch: Run) -> None:
    result = ranch("send", "helpdesk", "hi", "--url", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 2
    assert "is `ranch serve` running?" in result.stderr


def test_check_accepts_a_good_config(tmp_path: Path, ranch: Run) -> None:
    path = tmp_path / "team.yaml"
    path.write_text("agents:\n  - {id: a, kind: echo}\nteams:\n  - {id: t, members: [a], default_agent: a}\n")
    result = ranch("check", str(path))
    assert result.returncode == 0
    assert "ok: 1 agent(s), 1 team(s)" in result.stdout


def test_check_lists_every_problem_with_its_id_and_fails(tmp_path: Path, ranch: Run) -> None:
    path = tmp_path / "team.yaml"
    path.write_text(
        "agents:\n  - {id: a, kind: echo}\n  - {id: a, kind: echo}\n"
        "teams:\n  - {id: t, members: [a, ghost], default_agent: b}\n"
    )
    result = ranch("check", str(path))
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "error: a: duplicate id (ids are unique across agents and teams)",
        "error: t: member 'ghost' is not a defined agent or team",
        "error: t: default_agent 'b' is not a member",
    ]


def test_check_a_missing_file(tmp_path: Path, ranch: Run) -> None:
    result = ranch("check", str(tmp_path / "nope.yaml"))
    assert result.returncode == 1
    assert "cannot read the file" in result.stderr


def test_serve_refuses_a_bad_config_before_listening(tmp_path: Path, ranch: Run) -> None:
    path = tmp_path / "team.yaml"
    path.write_text("teams:\n  - {id: t, members: [x], default_agent: x}\n")
    result = ranch("serve", str(path), "--port", str(free_port()), timeout=30)
    assert result.returncode == 1
    assert "error: t: member 'x' is not a defined agent or team" in result.stderr


def test_serve_with_no_agents_yet_says_where_to_register_them() -> None:
    from ranch.cli.serve import banner
    from ranch.config import parse_config

    text = banner(parse_config("agents: []"), "http://127.0.0.1:8000", demo=False, db="hub.db")
    assert text.splitlines()[0] == "ranch is serving your config at http://127.0.0.1:8000"
    assert text.splitlines()[-1] == "no agents yet: register some at http://127.0.0.1:8000/api/v1/agents"
