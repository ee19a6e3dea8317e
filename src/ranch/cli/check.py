"""`ranch check CONFIG`: every problem with the id it concerns; non-zero exit if any."""

from __future__ import annotations

import argparse
from typing import Any

from ranch.config import load_config


def register(commands: Any) -> None:
    parser = commands.add_parser("check", help="validate a config file and list every problem")
    parser.add_argument("config", help="path to the YAML config")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config)  # ConfigError -> each problem printed, exit 1
    print(f"ok: {len(config.agents)} agent(s), {len(config.teams)} team(s) in {args.config}")
    return 0
