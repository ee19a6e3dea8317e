"""`ranch conform URL`: put any A2A agent that declares client-routing through the routing scenarios
and print a pass/fail table (exit 0: all pass; 1: one fails; 2: the agent could not be tested)."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import anyio

from ranch.conform import Report, run
from ranch.conform.probe import Unreachable

MARKS = {True: "pass", False: "FAIL", None: "skip"}


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "conform", help="check that an A2A agent speaks the client-routing extension (pass/fail table)"
    )
    parser.add_argument("url", help="the agent's base URL (its card at URL/.well-known/agent-card.json)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--key", help="sent as `Authorization: Bearer KEY` (default: $RANCH_API_KEY)")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each answer")
    parser.set_defaults(handler=conform)


def conform(args: argparse.Namespace) -> int:
    key = args.key or os.environ.get("RANCH_API_KEY") or None
    try:
        report = anyio.run(lambda: run(args.url, key=key, answer_within=args.timeout))
    except Unreachable as exc:
        if args.json:
            print(json.dumps({"url": args.url, "passed": False, "error": str(exc)}, indent=2))
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_json(), indent=2) if args.json else table(report))
    return 0 if report.passed else 1


def table(report: Report) -> str:
    """One line per scenario: its id, pass / FAIL / skip, and what the agent did."""
    width = max(len(outcome.id) for outcome in report.outcomes)
    lines = [f"client-routing v1 conformance: {report.agent} ({report.url})", ""]
    lines += [f"  {o.id:<{width}}  {MARKS[o.passed]:<4}  {o.detail}" for o in report.outcomes]
    passed = sum(1 for outcome in report.outcomes if outcome.passed)
    lines += ["", f"{passed} of {len(report.outcomes)} scenarios passed"]
    return "\n".join(lines)
