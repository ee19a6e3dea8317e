"""`ranch serve [CONFIG]`: every agent and team as an A2A server; the demo team without CONFIG."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import Any

import uvicorn

from ranch.cli import policy_flags
from ranch.cli.demo import DEMO_PROMPT, DEMO_TEAM, demo_config
from ranch.config import RanchConfig, load_config
from ranch.db.engine import SQLITE_BUSY_TIMEOUT_S
from ranch.db.replicas import DEFAULT_LEASE
from ranch.exceptions import ConfigError
from ranch.hub.app import DEFAULT_DATABASE_URL, DEFAULT_MAX_BODY, Settings, create_app
from ranch.policy.logs import AccessLog, configure_logging
from ranch.wire.cards import agent_url

QUIET_UVICORN: dict[str, Any] = {"log_config": None, "access_log": False}
"""ranch's handler writes uvicorn's records (scrubbed), and the access log is ranch's own."""


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
        "--sqlite-busy-timeout",
        type=float,
        default=float(os.environ.get("RANCH_SQLITE_BUSY_TIMEOUT", SQLITE_BUSY_TIMEOUT_S)),
        metavar="S",
        help="seconds a SQLite write waits for a lock held elsewhere before it fails "
        f"(env RANCH_SQLITE_BUSY_TIMEOUT; default {SQLITE_BUSY_TIMEOUT_S})",
    )
    parser.add_argument(
        "--lease",
        type=float,
        default=float(os.environ.get("RANCH_LEASE", DEFAULT_LEASE)),
        metavar="S",
        help="seconds a replica may stay silent before another takes its work over "
        f"(env RANCH_LEASE; default {DEFAULT_LEASE:g}; docs/deploy.md)",
    )
    parser.add_argument(
        "--max-body", type=int, default=DEFAULT_MAX_BODY, help="largest request body in bytes"
    )
    parser.add_argument(
        "--root",
        metavar="AGENT_ID",
        default=os.environ.get("RANCH_ROOT") or None,
        help="also serve this agent at the root: card at /.well-known/agent-card.json, "
        "JSON-RPC at POST /, HTTP+JSON at /message:send, /tasks ... (env RANCH_ROOT)",
    )
    parser.add_argument(
        "--ssl-certfile",
        metavar="PEM",
        default=os.environ.get("RANCH_SSL_CERTFILE") or None,
        help="serve HTTPS with this certificate (chain) file; needs --ssl-keyfile (env RANCH_SSL_CERTFILE)",
    )
    parser.add_argument(
        "--ssl-keyfile",
        metavar="PEM",
        default=os.environ.get("RANCH_SSL_KEYFILE") or None,
        help="the certificate's private key file (env RANCH_SSL_KEYFILE)",
    )
    parser.add_argument(
        "--log-level", default="info", choices=["critical", "error", "warning", "info", "debug"]
    )
    parser.add_argument(
        "--log-format",
        choices=["auto", "json", "text"],
        default=os.environ.get("RANCH_LOG_FORMAT", "auto"),
        help="log lines as JSON or as text; auto: text on a terminal, else JSON (env RANCH_LOG_FORMAT)",
    )
    parser.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        default=os.environ.get("RANCH_ACCESS_LOG", "on").strip().lower() not in ("0", "off", "false", "no"),
        help="no line per request (env RANCH_ACCESS_LOG=off); --log-level warning and above has none either",
    )
    policy_flags.add_arguments(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    tls = _tls(args)
    config = load_config(args.config) if args.config else demo_config()
    handler = configure_logging(debug=args.debug, level=args.log_level, format=args.log_format)
    writes_access = args.access_log and logging.getLogger().isEnabledFor(logging.INFO)
    settings = Settings(
        access_log=AccessLog.on(handler) if writes_access else None,
        database_url=args.db,
        sqlite_busy_timeout=args.sqlite_busy_timeout,
        lease=args.lease,
        root=args.root,
        max_body_bytes=args.max_body,
        admin_key=os.environ.get("RANCH_ADMIN_KEY") or None,
        demo=args.config is None,
        announce=lambda line: print(line, flush=True),
        **policy_flags.settings_from(args),
    )
    app = create_app(config, settings)
    base = f"{'https' if tls else 'http'}://{args.host}:{args.port}"
    print(banner(config, base, demo=args.config is None, db=args.db, root=args.root), flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level, **QUIET_UVICORN, **tls)
    return 0


def _tls(args: argparse.Namespace) -> dict[str, Any]:
    """uvicorn's TLS arguments: both files or neither, each one readable."""
    certfile, keyfile = args.ssl_certfile, args.ssl_keyfile
    if not certfile and not keyfile:
        return {}
    if not certfile or not keyfile:
        missing = "--ssl-keyfile" if certfile else "--ssl-certfile"
        raise ConfigError([f"{missing} is required too: HTTPS needs a certificate and its key"])
    for flag, path in (("--ssl-certfile", certfile), ("--ssl-keyfile", keyfile)):
        if not Path(path).is_file():
            raise ConfigError([f"{flag} {path}: no such file"])
    return {"ssl_certfile": certfile, "ssl_keyfile": keyfile}


def banner(config: RanchConfig, base: str, *, demo: bool, db: str, root: str | None = None) -> str:
    lines = [f"ranch is serving {'the built-in demo' if demo else 'your config'} at {base}"]
    if root is not None:
        lines.append(f"  root  {root:<14} {base}/  (card: {base}/.well-known/agent-card.json)")
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
