"""What a newcomer meets in the first hour, on the command line (issue 40): a taken port is one line
before anything else, `--version`, `ranch send --key` and `--stream` growing text in place, the
demo's `ranch agents --skill paper`, a piped `ranch watch`, `make help` and `make services`.

One in-process demo serves the module; a subprocess only where the real process is the point.
"""

from __future__ import annotations

import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from _support.fake_openai import FakeOpenAI, text
from _support.hubkit import ADMIN_KEY, RunningRanch, serve_ranch
from _support.servers import free_port
from ranch import __version__
from ranch.cli import main
from ranch.cli.demo import demo_config

ROOT = Path(__file__).resolve().parents[2]
DEMO_KEY = "rk_demo"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    """The built-in demo as `ranch serve` runs it (its room, and the user whose key is rk_demo)."""
    with serve_ranch(demo_config(), tmp_path_factory.mktemp("demo") / "t.db", demo=True) as served:
        yield served


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`ranch ARGV` in this process: its exit code, stdout and stderr."""
    with pytest.raises(SystemExit) as exited:
        main(list(argv))
    printed = capsys.readouterr()
    return int(exited.value.code or 0), printed.out, printed.err


def test_version_prints_ranchs_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "--version")
    assert code == 0 and out == f"ranch {__version__}\n"


def test_serve_on_a_port_in_use_says_so_in_one_line_before_any_banner_or_key(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        database = f"sqlite+aiosqlite:///{tmp_path / 'ranch.db'}"
        served = subprocess.run(
            [sys.executable, "-m", "ranch", "serve", "--port", str(port), "--db", database],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert served.returncode == 2
    assert served.stdout == ""  # no banner, no admin key
    assert served.stderr == f"error: port {port} is in use (try --port)\n"
    assert not (tmp_path / "ranch.db").exists()  # nothing was started


def test_agents_skill_paper_finds_the_demo_researcher(
    demo: RunningRanch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's `ranch agents --skill paper`, against the demo."""
    code, out, err = run_cli(capsys, "agents", "--skill", "paper", "--url", demo.url, "--key", DEMO_KEY)
    assert code == 0, err
    assert "researcher" in [line.split()[0] for line in out.splitlines()]


def test_send_with_key_calls_a_server_run_with_auth_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    with serve_ranch(demo_config(), tmp_path / "t.db", auth="keys") as keyed:
        code, out, err = run_cli(capsys, "send", "helpdesk", "write a note", "--url", keyed.url)
        assert code == 2 and out == ""
        assert err.startswith("error: helpdesk at ") and "needs an API key" in err and "--key" in err
        assert len(err.splitlines()) == 1
        code, out, err = run_cli(
            capsys, "send", "helpdesk", "write a note", "--url", keyed.url, "--key", "rk_no"
        )
        assert code == 2 and "the key given was refused" in err
        code, out, err = run_cli(
            capsys, "send", "helpdesk", "write a note", "--url", keyed.url, "--key", ADMIN_KEY
        )
        assert code == 0, err
        assert "route: user -> triage -> writer -> triage -> user" in out
        monkeypatch.setenv("RANCH_API_KEY", ADMIN_KEY)  # read when the parser is built
        code, out, err = run_cli(capsys, "send", "helpdesk", "write a note", "--url", keyed.url)
        assert code == 0, err


ANSWER = "Otters sleep holding hands so that they do not drift apart while they rest on the water."
LLM_TEAM = """
agents:
  - id: triage
    kind: rules
    rules:
      - {{match: "^Otters", reply: "Done.", route: user, reason: answered}}
      - {{reply: "Over to the writer: {{text}}", route: writer, reason: needs writing}}
  - {{id: writer, kind: llm, model: writer, base_url: "{base_url}", api_key: sk-test}}
teams:
  - {{id: desk, members: [triage, writer], default_agent: triage}}
"""


def test_send_stream_grows_each_hops_text_in_place(
    tmp_path: Path, fake: FakeOpenAI, base_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A streamed answer of many chunks is one line in its hop's block, not a line per chunk."""
    fake.script("writer", text(ANSWER))
    with serve_ranch(LLM_TEAM.format(base_url=base_url), tmp_path / "t.db") as served:
        code, out, err = run_cli(capsys, "send", "desk", "why otters", "--url", served.url, "--stream")
    assert code == 0, err
    lines = out.splitlines()
    blocks = lines[: lines.index("")]  # the hops, before the answer and the route
    assert blocks == [
        "-> triage  (default agent)",
        "   triage: Over to the writer: why otters",
        "-> writer  (needs writing)",
        f"   writer: {ANSWER}",
        "-> triage  (no decision; back to the default agent)",
        "   triage: Done.",
    ]


def test_watch_piped_prints_each_event_as_it_happens(demo: RunningRanch) -> None:
    """`ranch watch demo | ...`: stdout a pipe, no PYTHONUNBUFFERED; each line arrives while the
    watch runs, not when it ends."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    env.update(RANCH_URL=demo.url, RANCH_API_KEY=DEMO_KEY)
    with subprocess.Popen(
        [sys.executable, "-m", "ranch", "watch", "demo", "--last", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as watch:  # (closes the pipes)
        assert watch.stdout is not None and watch.stderr is not None
        try:
            assert b"-- watching demo" in watch.stderr.readline()  # subscribed from the newest cursor
            posted = httpx.post(
                f"{demo.url}/api/v1/rooms/demo/messages",
                json={"text": "@helpdesk find papers on piped lichen"},
                headers={"X-API-Key": DEMO_KEY},
                timeout=10,
            )
            assert posted.status_code == 201, posted.text
            lines = _lines_until(watch, b"route: user -> triage -> researcher -> triage -> user", within=20)
        finally:
            watch.terminate()
            watch.wait(timeout=10)
    assert any(b"demo: @helpdesk find papers on piped lichen" in line for line in lines)
    assert b"   -> triage -> researcher (needs research)" in b"\n".join(lines)


def _lines_until(process: subprocess.Popen[bytes], wanted: bytes, within: float) -> list[bytes]:
    """The lines `process` writes to its stdout pipe, read as they come, until one holds `wanted`."""
    assert process.stdout is not None
    lines: list[bytes] = []
    deadline = time.monotonic() + within
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while not any(wanted in line for line in lines):
            left = deadline - time.monotonic()
            assert left > 0 and selector.select(left), f"no {wanted!r} while it ran; read {lines}"
            line = process.stdout.readline()
            assert line, f"the watch ended; read {lines}"
            lines.append(line)
    return lines


def test_make_help_lists_every_target_with_a_description() -> None:
    listed = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True)
    described = {
        line.split(":")[0]
        for line in (ROOT / "Makefile").read_text().splitlines()
        if "##" in line and ":" in line and not line.startswith(("\t", "#", " "))
    }
    shown = {line.split()[1] for line in listed.stdout.splitlines()}
    assert {"a2a03", "bench-smoke", "services"} <= described
    assert shown == described


def test_make_services_names_the_service_that_is_not_running() -> None:
    """`make test` starts with this check: one line naming what is missing, before pytest."""
    down = f"127.0.0.1:{free_port()}"
    # as a user types it: not as a sub-make of `make test`, which would add its own lines
    env = {name: value for name, value in os.environ.items() if not name.startswith("MAKE")}
    checked = subprocess.run(
        ["make", "-s", "--no-print-directory", "services", f"SERVICES=PostgreSQL={down}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert checked.returncode != 0
    ours = [line for line in checked.stderr.splitlines() if not line.startswith("make: ***")]
    assert ours == [f'make test needs PostgreSQL at {down}, not running here (README, "The two commands")']
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        up = f"127.0.0.1:{listening.getsockname()[1]}"
        fine = subprocess.run(
            ["make", "-s", "services", f"SERVICES=Redis={up}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env=env,
        )
    assert fine.returncode == 0 and fine.stdout == fine.stderr == ""
