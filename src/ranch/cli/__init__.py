"""The `ranch` command: serve, send, rooms, post, watch, agents, check, db, mcp. A RanchError becomes
one line and exit code 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from ranch.exceptions import ConfigError, RanchError


def build_parser() -> argparse.ArgumentParser:
    from ranch.cli import check, db, mcp, rooms, send, serve

    parser = argparse.ArgumentParser(
        prog="ranch", description="Teams of A2A agents that route work to each other."
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve.register(commands)
    send.register(commands)
    rooms.register(commands)
    check.register(commands)
    db.register(commands)
    mcp.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
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
