"""`ranch serve [CONFIG]`: every agent and team as an A2A server; the demo team without CONFIG."""

from __future__ import annotations

import argparse
import os
from typing import Any

import uvicorn

from ranch.cli import policy_flags
from ranch.cli.demo import DEMO_PROMPT, DEMO_TEAM, demo_config
from ranch.config import RanchConfig, load_config
from ranch.hub.app import DEFAULT_DATABASE_URL, DEFAULT_MAX_BODY, Settings, create_app
from ranch.policy.logs import configure_logging
from ranch.wire.cards import agent_url


def register(commands: Any) -> None:
    parser = commands.add_parser("serve", help="serve every agent and team of CONFIG (or the demo team)")
    parser.add_argument("config", nargs="?", help="YAML config; omit for the built-in demo team")
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument(
        "--db",
        default=os.environ.get("RANCH_DATABASE_URL", DEFAULT_DATABASE_URL),
        help=f"database URL for tasks and rooms (env RANCH_DATABASE_URL; default {DEFAULT_DATABASE_URL})",
    )
    parser.add_argument(
        "--max-body", type=int, default=DEFAULT_MAX_BODY, help="largest request body in bytes"
    )
    parser.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    policy_flags.add_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    config = load_config(args.config) if args.config else demo_config()
    settings = Settings(
        database_url=args.db,
        max_body_bytes=args.max_body,
        admin_key=os.environ.get("RANCH_ADMIN_KEY") or None,
        demo=args.config is None,
        announce=lambda line: print(line, flush=True),
        **policy_flags.settings_from(args),
    )
    configure_logging(debug=settings.debug, level=args.log_level)  # JSON, scrubbed; uvicorn's records too
    app = create_app(config, settings)
    print(banner(config, f"http://{args.host}:{args.port}", demo=args.config is None, db=args.db), flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, log_config=None)
    return 0


def banner(config: RanchConfig, base: str, *, demo: bool, db: str) -> str:
    lines = [f"ranch is serving {'the built-in demo' if demo else 'your config'} at {base}"]
    for team in config.teams:
        lines.append(
            f"  team  {team.id:<14} {agent_url(base, team.id)}  (members: {', '.join(team.members)})"
        )
    for agent in config.agents:
        lines.append(f"  agent {agent.id:<14} {agent_url(base, agent.id)}  ({agent.kind})")
    lines.append(f"  rooms: {base}/api/v1 (REST) and {base.replace('http', 'ws', 1)}/api/v1/ws")
    lines.append(f"  tasks and rooms are stored in {db}")
    target = DEMO_TEAM if demo else (config.teams[0].id if config.teams else config.agents[0].id)
    prompt = DEMO_PROMPT if demo else "hello"
    url_flag = "" if base == "http://127.0.0.1:8000" else f" --url {base}"
    lines.append(f'try: ranch send {target} "{prompt}"{url_flag} --stream')
    if demo:
        lines.append(
            f"  or: curl -H 'X-API-Key: rk_demo' -H 'Content-Type: application/json' "
            f'-d \'{{"text": "@{DEMO_TEAM} {prompt}"}}\' {base}/api/v1/rooms/demo/messages'
        )
    return "\n".join(lines)
