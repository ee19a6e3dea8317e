"""The `ranch` command: serve, send, rooms, post, watch, agents, check, db, mcp. A RanchError becomes
one line and exit code 2.

Only the command being run is imported: the others are listed by name and help, so `ranch rooms`
and `ranch --help` start without loading the server (tests/cli/test_cli_start.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Collection, Sequence

from ranch._version import __version__
from ranch.exceptions import ConfigError, RanchError

DEFAULT_URL = "http://127.0.0.1:8000"
"""Where the client commands find the hub: `ranch serve`'s address, and `ranch.client`'s default."""

COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("serve", "serve every agent and team of CONFIG (or the demo team)"),
    "send": ("send", "send TEXT to an agent or team of a running server"),
    "rooms": ("rooms", "list the rooms you take part in"),
    "post": ("rooms", "post a message (and files) into a room"),
    "watch": ("rooms", "follow a room live: messages, agents' status, each team's route"),
    "agents": ("rooms", "list the agents and teams you can use"),
    "check": ("check", "validate a config file and list every problem"),
    "conform": ("conform", "check that an A2A agent speaks the client-routing extension (pass/fail table)"),
    "replay": ("replay", "re-run a recorded team turn on a changed config; old and new routes side by side"),
    "eval": ("eval", "run a routing regression suite on a team config (--record writes one)"),
    "db": ("db", "apply or show the database migrations"),
    "mcp": ("mcp", "serve every agent and team as MCP tools over stdio"),
}
"""Each command, in `ranch --help`'s order: the module under ranch.cli that registers it, and its
help line (the module's own, which tests/cli/test_cli_start.py compares)."""


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The parser with `commands` in full (None: every command), and every other command listed
    by name and help only, so that its module and what that imports stay unloaded."""
    parser = argparse.ArgumentParser(
        prog="ranch", description="Teams of A2A agents that route work to each other."
    )
    parser.add_argument("--version", action="version", version=f"ranch {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in dict.fromkeys(module for module, _ in COMMANDS.values()):
        names = [name for name, (owner, _) in COMMANDS.items() if owner == module]
        if commands is None or any(name in commands for name in names):
            importlib.import_module(f"ranch.cli.{module}").register(subparsers)
            continue
        for name in names:
            subparsers.add_parser(name, help=COMMANDS[name][1])
    return parser


def _command_in(argv: Sequence[str]) -> str | None:
    """The command `argv` names: its first positional (the top level takes no option but -h)."""
    return next((arg for arg in argv if not arg.startswith("-")), None)


def main(argv: Sequence[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    command = _command_in(argv)
    parser = build_parser([command] if command in COMMANDS else [])
    args = parser.parse_args(argv)
    try:
        code = args.handler(args)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        code = 1
    except RanchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)
