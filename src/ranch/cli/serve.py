"""`ranch serve [CONFIG]`: every agent and team as an A2A server; the demo team without CONFIG."""

from __future__ import annotations

import argparse
import atexit
import errno
import json
import logging
import os
import socket
import tempfile
from pathlib import Path
from typing import Any

import anyio
import uvicorn

from ranch.cli import lifeline, policy_flags
from ranch.cli.demo import DEMO_PROMPT, DEMO_TEAM, demo_config
from ranch.config import RanchConfig, load_config
from ranch.db.engine import SQLITE_BUSY_TIMEOUT_S
from ranch.db.replicas import DEFAULT_LEASE
from ranch.edge.coalesce import http_protocol
from ranch.edge.connections import BODY_TIMEOUT, HEAD_TIMEOUT, PER_ADDRESS, ConnectionLimits, proxy_networks
from ranch.exceptions import ConfigError, RanchError
from ranch.hub.app import DEFAULT_DATABASE_URL, DEFAULT_MAX_BODY, Settings, create_app
from ranch.observe import metrics
from ranch.policy.logs import AccessLog, configure_logging
from ranch.retention.policy import merged
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
        "--forwarded-allow-ips",
        metavar="ADDRESSES",
        default=os.environ.get("RANCH_FORWARDED_ALLOW_IPS", ""),
        help="comma-separated addresses or networks of the proxies in front (a load balancer): only "
        "their X-Forwarded-For and X-Forwarded-Proto are believed, and their connections are not "
        "capped (env RANCH_FORWARDED_ALLOW_IPS; default none: the client is the TCP peer, whatever "
        "it says); docs/deploy.md",
    )
    _env_number(
        parser,
        "--header-timeout",
        "RANCH_HEADER_TIMEOUT",
        HEAD_TIMEOUT,
        "seconds a request's head may take to arrive, from its first byte or the connection's opening",
    )
    _env_number(
        parser,
        "--body-timeout",
        "RANCH_BODY_TIMEOUT",
        BODY_TIMEOUT,
        "seconds a request body may go without sending any of itself",
    )
    _env_number(
        parser,
        "--max-connections-per-address",
        "RANCH_MAX_CONNECTIONS_PER_ADDRESS",
        PER_ADDRESS,
        "open connections one client address may hold (per process); more are closed at once",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=int(os.environ.get("RANCH_WORKERS", "1")),
        metavar="N",
        help="serve with N processes on one database; N > 1 needs --redis-url, through which they "
        "share task events, sessions, rate limits and catalog changes (env RANCH_WORKERS; default 1)",
    )
    parser.add_argument(
        "--root",
        metavar="AGENT_ID",
        default=os.environ.get("RANCH_ROOT") or None,
        help="also serve this agent at the root: card at /.well-known/agent-card.json, "
        "JSON-RPC at POST /, HTTP+JSON at /message:send, /tasks ... (env RANCH_ROOT)",
    )
    parser.add_argument(
        "--grpc-port",
        type=int,
        metavar="PORT",
        default=os.environ.get("RANCH_GRPC_PORT") or None,  # a bad value: argparse's error, naming the flag
        help="also serve every agent and team over A2A gRPC on this port of --host, the request's "
        "tenant naming the agent (env RANCH_GRPC_PORT; default off; docs/surface.md)",
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
        "--metrics",
        action="store_true",
        default=os.environ.get("RANCH_METRICS", "off").strip().lower() in ("1", "on", "true", "yes"),
        help="serve Prometheus metrics at GET /metrics (with --auth keys, the superuser's key "
        "is needed) (env RANCH_METRICS=on); docs/observability.md",
    )
    parser.add_argument(
        "--trace-url",
        metavar="TEMPLATE",
        default=os.environ.get("RANCH_TRACE_URL") or None,
        help="a trace viewer's URL with {trace_id} in it (Jaeger, Tempo): the web page links each team "
        "turn to its trace (env RANCH_TRACE_URL). Traces are exported when OTEL_EXPORTER_OTLP_ENDPOINT "
        "(or another OTEL_* exporter setting) is set",
    )
    parser.add_argument(
        "--replay-config",
        dest="replay_configs",
        action="append",
        metavar="NAME=PATH",
        default=None,
        help="offer the config file PATH, as NAME, to replay stored team turns on from the page and "
        "POST /api/v1/replay (owners and admins); repeatable (env RANCH_REPLAY_CONFIGS, NAME=PATH,...); "
        "docs/replay.md",
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


def _env_number(parser: Any, flag: str, env: str, default: float, what: str) -> None:
    """A number flag whose default is read from `env` as text, so argparse parses a bad value there
    like one on the command line: an error naming the flag (seconds are floats, counts ints)."""
    parser.add_argument(
        flag,
        type=type(default),
        default=os.environ.get(env, str(default)),
        metavar="S" if isinstance(default, float) else "N",
        help=f"{what} (env {env}; default {default:g})",
    )


def run(args: argparse.Namespace) -> int:
    tls = _tls(args)
    connections = _connections(args)
    workers = _workers(args)
    config, settings, access_log = _hub(args)
    check_port_free(args.host, args.port, "--port")  # before the banner, the admin key, any log line
    if args.grpc_port is not None:
        check_port_free(args.host, args.grpc_port, "--grpc-port")
    app = create_app(config, settings)
    base = f"{'https' if tls else 'http'}://{args.host}:{args.port}"
    print(banner(config, base, demo=args.config is None, db=args.db, root=args.root), flush=True)
    if args.grpc_port is not None:
        secure = " (TLS)" if tls else ""
        print(
            f"  gRPC  {args.host}:{args.grpc_port}{secure}: the request's tenant names the agent", flush=True
        )
    serving: dict[str, Any] = {"host": args.host, "port": args.port, "log_level": args.log_level}
    if workers > 1:
        if args.metrics:  # each worker writes its samples here; /metrics on any worker sums them all
            os.environ.setdefault(metrics.MULTIPROCESS_DIR, tempfile.mkdtemp(prefix="ranch-metrics-"))
        # migrations, the admin key and the demo room once, here, before the workers start
        anyio.run(_start_and_stop, app)
        os.environ[WORKER_ARGS] = json.dumps({k: v for k, v in vars(args).items() if k != "handler"})
        os.environ[WORKER_PARENT] = str(os.getpid())
        print(f"  {workers} workers on {args.db}, sharing {args.redis_url}", flush=True)
        uvicorn.run(
            f"{__name__}:worker_app",
            factory=True,
            workers=workers,
            **serving,
            **QUIET_UVICORN,
            **tls,
            **connections,
        )
        return 0
    try:
        uvicorn.run(app, **serving, **QUIET_UVICORN, **tls, **connections)
    finally:
        if access_log is not None:
            access_log.flush()  # the last tick's lines
    return 1 if app.state.hub.failure is not None else 0  # its background work failed: restart it


WORKER_ARGS = "RANCH_SERVE_WORKER_ARGS"
"""How `ranch serve --workers N` hands its arguments to the worker processes uvicorn starts."""
WORKER_PARENT = "RANCH_SERVE_WORKER_PARENT"
"""The pid of `ranch serve --workers N` itself, whose workers end when it does (cli/lifeline.py)."""


def worker_app() -> Any:
    """The app of one worker of `ranch serve --workers N` (uvicorn calls this in each process)."""
    args = argparse.Namespace(**json.loads(os.environ[WORKER_ARGS]))
    config, settings, access_log = _hub(args, quiet=True)
    lifeline.end_with_parent(int(os.environ[WORKER_PARENT]))  # no orphan holds the port after a kill -9
    if access_log is not None:
        atexit.register(access_log.flush)
    return create_app(config, settings)


def _hub(args: argparse.Namespace, *, quiet: bool = False) -> tuple[RanchConfig, Settings, AccessLog | None]:
    """The config, settings and access log `ranch serve` runs with (`quiet`: no start-up notices)."""
    config = load_config(args.config) if args.config else demo_config()
    handler = configure_logging(debug=args.debug, level=args.log_level, format=args.log_format)
    writes_access = args.access_log and logging.getLogger().isEnabledFor(logging.INFO)
    access_log = AccessLog.on(handler) if writes_access else None
    settings = Settings(
        access_log=access_log,
        database_url=args.db,
        sqlite_busy_timeout=args.sqlite_busy_timeout,
        lease=args.lease,
        root=args.root,
        max_body_bytes=args.max_body,
        admin_key=os.environ.get("RANCH_ADMIN_KEY") or None,
        metrics=args.metrics,
        trace_url=args.trace_url,
        replay_configs=replay_configs(getattr(args, "replay_configs", None)),
        demo=args.config is None,
        announce=(lambda _line: None) if quiet else (lambda line: print(line, flush=True)),
        exit_on_failure=True,
        freeze_heap=True,
        retention=merged(config.retention, policy_flags.retention_from(args)),
        **_grpc(args),
        **policy_flags.settings_from(args),
    )
    return config, settings, access_log


def replay_configs(given: list[str] | None) -> tuple[tuple[str, str], ...]:
    """`--replay-config NAME=PATH` (else RANCH_REPLAY_CONFIGS, comma-separated) as (name, path)
    pairs; a malformed entry, a name given twice or a file that is not there fails at start."""
    entries = given if given is not None else os.environ.get("RANCH_REPLAY_CONFIGS", "").split(",")
    offered: dict[str, str] = {}
    for entry in (text.strip() for text in entries):
        if not entry:
            continue
        name, equals, path = (part.strip() for part in entry.partition("="))
        if not equals or not name or not path:
            raise ConfigError([f"--replay-config {entry}: give NAME=PATH"])
        if name in offered:
            raise ConfigError([f"--replay-config {entry}: the name '{name}' is given twice"])
        if not Path(path).is_file():
            raise ConfigError([f"--replay-config {entry}: no file at {path}"])
        offered[name] = str(Path(path).resolve())
    return tuple(offered.items())


def check_port_free(host: str, port: int, flag: str) -> None:
    """Bind `host:port` as uvicorn will (SO_REUSEADDR), and let go: a port another process listens
    on is one line naming the port and the flag, not a banner, a new admin key and a log record."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise RanchError(f"--host {host}: cannot be resolved ({exc.strerror})") from None
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise RanchError(f"port {port} is in use (try {flag})") from None
            raise RanchError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def _grpc(args: argparse.Namespace) -> dict[str, Any]:
    """The gRPC settings: on `--host`, with the HTTP server's certificate (TLS files checked by `_tls`)."""
    port = getattr(args, "grpc_port", None)
    if port is None:
        return {}
    if not 0 < port < 65536:
        raise ConfigError([f"--grpc-port {port}: a port from 1 to 65535"])
    if port == args.port:
        raise ConfigError([f"--grpc-port {port}: the HTTP server's --port; pick another"])
    if args.workers > 1:
        raise ConfigError(
            [f"--grpc-port serves from one process; it cannot go with --workers {args.workers}"]
        )
    tls = (args.ssl_certfile, args.ssl_keyfile) if args.ssl_certfile and args.ssl_keyfile else None
    return {"grpc_port": port, "grpc_host": args.host, "grpc_tls": tls}


def _workers(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise ConfigError([f"--workers {args.workers}: at least 1"])
    if args.workers > 1 and not args.redis_url:
        raise ConfigError(
            [
                f"--workers {args.workers} needs --redis-url (or RANCH_REDIS_URL): the workers share task "
                "events, sessions, rate limits and catalog changes through Redis"
            ]
        )
    return int(args.workers)


async def _start_and_stop(app: Any) -> None:
    """Run the app's start-up and shut-down once (what every worker would otherwise race to do first)."""
    async with app.router.lifespan_context(app):
        pass


def _connections(args: argparse.Namespace) -> dict[str, Any]:
    """uvicorn's protocol and proxy arguments: forwarded headers believed from the named proxies
    only (none by default, loopback included), and every connection guarded (edge/connections.py)."""
    try:
        proxies = proxy_networks(args.forwarded_allow_ips, "--forwarded-allow-ips")
    except ValueError as exc:
        raise ConfigError([str(exc)]) from None
    for flag, value in (("--header-timeout", args.header_timeout), ("--body-timeout", args.body_timeout)):
        if not value > 0:
            raise ConfigError([f"{flag} {value:g}: more than 0 seconds"])
    if args.max_connections_per_address < 1:
        raise ConfigError([f"--max-connections-per-address {args.max_connections_per_address}: at least 1"])
    limits = ConnectionLimits(
        args.header_timeout, args.body_timeout, args.max_connections_per_address, proxies
    )
    trusted: dict[str, Any] = {"forwarded_allow_ips": list(proxies)} if proxies else {}
    # no per-message compression: a room's event is encoded once for all its watchers, and a
    # compressor per WebSocket cost memory of each idle watcher and a compression per watcher
    return {
        "proxy_headers": bool(proxies),
        **trusted,
        **http_protocol(limits),
        "ws_per_message_deflate": False,
    }


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
    served = [team.id for team in config.teams] + [agent.id for agent in config.agents]
    if not demo and not served:  # agents come later, registered over the API
        lines.append(f"no agents yet: register some at {base}/api/v1/agents")
        return "\n".join(lines)
    target = DEMO_TEAM if demo else served[0]
    prompt = DEMO_PROMPT if demo else "hello"
    url_flag = "" if base == "http://127.0.0.1:8000" else f" --url {base}"
    lines.append(f'try: ranch send {target} "{prompt}"{url_flag} --stream')
    if demo:
        lines.append(
            f"  or: curl -H 'X-API-Key: rk_demo' -H 'Content-Type: application/json' "
            f'-d \'{{"text": "@{DEMO_TEAM} {prompt}"}}\' {base}/api/v1/rooms/demo/messages'
        )
    return "\n".join(lines)
