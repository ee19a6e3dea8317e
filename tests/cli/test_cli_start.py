"""`ranch` starts at once: building the parser and the client commands load no server (issue 39).

What a command loads is read in a fresh interpreter: this one has the server loaded already.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from _support.servers import Run, free_port
from ranch.cli import COMMANDS, DEFAULT_URL, build_parser

SERVER = (
    "ranch.hub",
    "ranch.api",
    "ranch.web",
    "ranch.edge",
    "ranch.rooms",
    "ranch.tasks",
    "ranch.catalog",
    "ranch.db",
    "ranch.fanout",
    "ranch.policy",
    "ranch.config",
    "sqlalchemy",
    "alembic",
    "aiosqlite",
    "asyncpg",
    "uvicorn",
    "redis",
    "yaml",
    "mcp",
    "a2a.server",
)
"""What only the server and the server commands need: the hub, its stores, its HTTP stack."""

CLIENT = ("ranch.client", "websockets", "a2a.client")
"""What a client command needs once it runs, and its parser does not."""

MACHINERY = (
    "ranch.hub",
    "ranch.edge",
    "ranch.tasks",
    "ranch.identity",
    "ranch.fanout",
    "ranch.api.errors",
    "ranch.wire.errors",
    "ranch.policy.ratelimit",
    "ranch.db",
    "sqlalchemy",
    "a2a.server",
    "redis",
    "uvicorn",
    "alembic",
    "aiosqlite",
    "asyncpg",
)
"""What serves and stores: never loaded by a client command, even once it reads the hub's models."""


WATCH = """
import atexit, json, pathlib, sys
atexit.register(lambda: pathlib.Path(sys.argv[1]).write_text(json.dumps(sorted(sys.modules))))
"""
"""Prepended to the child's code: at exit (a command ends with sys.exit), the modules it loaded."""


def loaded(tmp_path: Path, code: str) -> set[str]:
    """The modules a fresh interpreter holds after `code`."""
    out = tmp_path / "modules.json"
    done = subprocess.run(
        [sys.executable, "-c", WATCH + code, str(out)], capture_output=True, text=True, timeout=60
    )
    assert out.exists(), done.stderr
    return set(json.loads(out.read_text()))


def among(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    return sorted({p for p in packages for m in modules if m == p or m.startswith(f"{p}.")})


def test_import_ranch_cli_loads_no_server_and_no_client(tmp_path: Path) -> None:
    assert among(loaded(tmp_path, "import ranch.cli"), SERVER + CLIENT) == []


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["rooms", "--help"], ["post", "--help"], ["watch", "--help"], ["agents", "--help"]],
    ids=" ".join,
)
def test_help_loads_no_server_and_no_client(tmp_path: Path, argv: list[str]) -> None:
    modules = loaded(tmp_path, f"from ranch.cli import main; main({argv!r})")
    assert among(modules, SERVER + CLIENT) == []


def test_send_loads_the_sdk_client_and_no_server(tmp_path: Path) -> None:
    modules = loaded(tmp_path, "from ranch.cli import main; main(['send', '--help'])")
    assert among(modules, SERVER) == []


def test_import_ranch_client_loads_no_server(tmp_path: Path) -> None:
    """A script or an external agent starts without the server: its models load on first use."""
    assert among(loaded(tmp_path, "import ranch.client"), (*SERVER, "starlette")) == []


@pytest.mark.parametrize("argv", [["rooms"], ["agents"], ["post", "demo", "hi"]], ids=" ".join)
def test_a_client_command_loads_none_of_the_servers_machinery(tmp_path: Path, argv: list[str]) -> None:
    """Each reads the hub's models (its request's, its answer's) before it calls: no SQLAlchemy."""
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code = f"from ranch.cli import main; main({[*argv, '--url', url]!r})"
    assert among(loaded(tmp_path, code), MACHINERY) == []


def test_every_model_the_client_reads_loads_none_of_the_servers_machinery(tmp_path: Path) -> None:
    code = "import ranch.client.models as m; [getattr(m, name) for name in m.__all__]"
    assert among(loaded(tmp_path, code), MACHINERY) == []


def test_rooms_reads_its_views_alone(tmp_path: Path) -> None:
    """`ranch rooms` loads the rooms' views, not the config's models or the A2A SDK's types that the
    registrations and the message bodies bring."""
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    modules = loaded(tmp_path, f"from ranch.cli import main; main(['rooms', '--url', {url!r}])")
    assert "ranch.rooms.views" in modules
    assert among(modules, ("ranch.config", "ranch.policy", "ranch.api", "yaml", "a2a")) == []


def test_the_help_lists_every_command_as_its_module_registers_it() -> None:
    """`ranch --help` without the command modules reads as with them, command for command."""
    assert build_parser([]).format_help() == build_parser().format_help()
    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(commands.choices) == list(COMMANDS)


def test_the_client_commands_default_to_the_clients_url() -> None:
    from ranch.client.hub import DEFAULT_URL as CLIENT_DEFAULT

    assert DEFAULT_URL == CLIENT_DEFAULT


@pytest.mark.parametrize("argv", [["rooms"], ["agents"], ["post", "demo", "hi"], ["send", "echo", "hi"]])
def test_a_client_command_without_a_server_says_so(ranch: Run, argv: list[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = ranch(*argv, "--url", url)
    assert done.returncode == 2, done.stderr
    assert f"error: cannot reach ranch at {url}" in done.stderr and "is `ranch serve` running?" in done.stderr


def test_a_one_process_server_loads_no_redis_client(tmp_path: Path) -> None:
    """Redis is for replicas (`--redis-url`): a hub without it starts without redis-py, whose import
    brings OpenTelemetry's metrics SDK and cryptography along, a large part of every start."""
    code = "import ranch.cli.serve, ranch.hub.app, ranch.identity.sessions, ranch.policy.ratelimit"
    modules = loaded(tmp_path, code)
    assert "ranch.hub.app" in modules
    assert among(modules, ("redis", "ranch.fanout.redis", "ranch.policy.redis_client")) == []
