"""`ranch check CONFIG`: every problem with the id it concerns (non-zero exit if any), then each
routing trap as a warning with its line and fix (non-zero with `--strict`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ranch.catalog.lint import lint_file
from ranch.config import load_config


def register(commands: Any) -> None:
    parser = commands.add_parser("check", help="validate a config file and list every problem")
    parser.add_argument("config", help="path to the YAML config")
    parser.add_argument("--strict", action="store_true", help="exit 1 when there are warnings too")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)  # ConfigError -> each problem printed, exit 1
    findings = lint_file(args.config, config)
    for finding in findings:
        print(finding.render(args.config), file=sys.stderr)
    counted = f"{len(config.agents)} agent(s), {len(config.teams)} team(s) in {args.config}"
    if not findings:
        print(f"ok: {counted}")
        return 0
    if args.strict:
        print(f"error: {len(findings)} warning(s) in {args.config} (--strict)", file=sys.stderr)
        return 1
    print(f"ok: {counted}; {len(findings)} warning(s)")
    return 0
