"""`ranch eval SUITE.yaml`: a routing regression suite run against a team config, a pass/fail table and
an exit code for CI (0 all passed, 1 a case failed, 2 bad input); `--record` writes the suite from a
team's last turns (docs/replay.md)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from ranch.cli.replay import STORE_URL, checked_config, store_url

HELP = "run a routing regression suite on a team config (--record writes one)"


def register(commands: Any) -> None:
    parser = commands.add_parser("eval", help=HELP)
    parser.add_argument("suite", metavar="SUITE.yaml", help="the suite file (written with --record)")
    parser.add_argument("--config", help="the team config to run it on (default: the suite's `config:`)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON, for scripts")
    parser.add_argument("--record", action="store_true", help="write SUITE.yaml from the team's last turns")
    parser.add_argument("--team", help="--record: the team whose turns to record")
    parser.add_argument("--last", type=int, default=20, help="--record: how many turns (default 20)")
    parser.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help=f"--record: the task store (env RANCH_DATABASE_URL; default {STORE_URL})",
    )
    parser.add_argument("--force", action="store_true", help="--record: overwrite SUITE.yaml")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return record(args) if args.record else evaluate(args)


def evaluate(args: argparse.Namespace) -> int:
    from ranch.replay.evaluate import run_suite, table
    from ranch.replay.recording import ReplayInputError
    from ranch.replay.suite import SuiteError, check_against, load_suite

    try:
        suite = load_suite(args.suite)
        config_path = args.config
        if config_path is None and suite.config is not None:
            config_path = str(Path(args.suite).parent / suite.config)
        if config_path is None:
            raise ReplayInputError(f"{args.suite}: no config to run on (--config, or `config:` in the suite)")
        config = checked_config(config_path)
        check_against(suite, config, args.suite)
    except SuiteError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    results = anyio.run(run_suite, suite, config)
    if args.json:
        print(json.dumps({"config": config_path, "cases": [r.to_json() for r in results]}, indent=2))
    else:
        print("\n".join(table(results)))
    return 0 if all(result.passed for result in results) else 1


def record(args: argparse.Namespace) -> int:
    from ranch.replay import changes, sources
    from ranch.replay.recording import ReplayInputError
    from ranch.replay.suite import recorded_suite

    if not args.team:
        raise ReplayInputError("--record: name the team whose turns to record (--team ID)")
    if args.last < 1:
        raise ReplayInputError(f"--last: {args.last} is not a number of turns (1 or more)")
    target = Path(args.suite)
    if target.exists() and not args.force:
        raise ReplayInputError(f"{target} exists; --force overwrites it")
    baseline = None
    if args.config:
        config = checked_config(args.config)
        changes.team_of(config, args.team, args.config)
        baseline = changes.fingerprints(config, args.team)
    url = store_url(args.db)
    turns = anyio.run(sources.recent_turns, url, args.team, args.last)
    if not turns:
        raise ReplayInputError(f"no turns of team '{args.team}' in {sources.shown_url(url)}")
    config_entry = os.path.relpath(args.config, target.parent) if args.config else None
    source = sources.shown_url(url)
    target.write_text(
        recorded_suite(turns, args.team, source=source, config=config_entry, baseline=baseline),
        encoding="utf-8",
    )
    print(f"wrote {len(turns)} turn(s) of team {args.team} to {target}")
    return 0
