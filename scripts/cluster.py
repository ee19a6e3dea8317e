"""`make cluster`: ranch replicas on PostgreSQL and Redis behind HAProxy, everything on 127.0.0.1.

Starts N `ranch serve` processes on one PostgreSQL database and one Redis prefix (the first one
applies the migrations before the others start), then HAProxy in front of them (round robin,
health checks on /healthz every half second, WebSockets and streams passed through; it sets the
client's address in X-Forwarded-For, which the replicas believe from it only, gives a request head
--head-timeout seconds and caps the connections of one address), prints the one URL to use and
each replica's own, and stops everything on Ctrl-C or SIGTERM. A replica that
dies (kill -9 one of the printed pids to watch failover) is left dead: HAProxy stops sending it
requests and the others take over its work (docs/deploy.md).

    python scripts/cluster.py [CONFIG] [--replicas 3] [--port 8100] [--db URL] [--redis-url URL]
        [--redis-prefix P] [--lease S] [--head-timeout S] [--max-connections-per-address N]
        [-- ARGS FOR EVERY ranch serve]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit, urlunsplit

import httpx

HOST = "127.0.0.1"
DEFAULT_DB = "postgresql+asyncpg://postgres@127.0.0.1:5432/ranch_cluster"
DEFAULT_REDIS = "redis://127.0.0.1:6379/0"
STARTUP = 60.0
"""Seconds a replica, or HAProxy, may take to answer its health check."""

HAPROXY_CONFIG = """\
global
    maxconn 4096

defaults
    mode http
    timeout connect 2s
    # what a client owes: a request head within {head_timeout}s (408 otherwise), the next request
    # of a kept-alive connection within 5 s, and no stall longer than 30 s while it sends a body
    timeout http-request {head_timeout}s
    timeout http-keep-alive 5s
    timeout client 30s
    # the long waits are for answers and streams (a turn, SSE) and for WebSockets (a tunnel)
    timeout server 1h
    timeout tunnel 1h
    # a request that could not reach a replica at all goes to another (never one that reached it)
    retries 2
    option redispatch

frontend ranch
    bind {host}:{port}
    # one address holds at most {per_address} connections at once; more are refused at once
    stick-table type ip size 100k expire 30s store conn_cur
    tcp-request connection track-sc0 src
    tcp-request connection reject if {{ sc_conn_cur(0) gt {per_address} }}
    # the client's address and scheme are the balancer's to say: what a client sent is replaced
    # (the replicas believe these headers from the balancer only: --forwarded-allow-ips)
    http-request del-header X-Forwarded-For
    option forwardfor
    http-request set-header X-Forwarded-Proto %[ssl_fc,iif(https,http)]
    # a room's calls go to one replica (while it is up): its posts share that replica's commits
    # instead of taking turns at the room's lock with the other replicas' (docs/deploy.md)
    use_backend rooms if {{ path_beg /api/v1/rooms/ }}
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk GET /healthz
    default-server inter 500ms fall 2 rise 1
    http-response set-header X-Ranch-Replica %s
{servers}

backend rooms
    # the path up to the room's id (/api/v1/rooms/ID) picks the replica; a replica that goes down
    # moves only its own rooms to the others
    balance uri depth 4
    hash-type consistent
    option httpchk GET /healthz
    default-server inter 500ms fall 2 rise 1
    http-response set-header X-Ranch-Replica %s
{servers}
"""
HEAD_TIMEOUT = 10.0
"""Seconds a client may take to send a request's head, at the balancer and at each replica."""
PER_ADDRESS = 256
"""Connections one client address may hold at the balancer."""


def parse(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="cluster", description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", help="the ranch config every replica serves (default: the demo)")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--port", type=int, default=8100, help="HAProxy's port (default 8100)")
    parser.add_argument(
        "--replica-ports", default="", help="comma-separated ports of the replicas (default: the next ones)"
    )
    parser.add_argument("--db", default=os.environ.get("RANCH_CLUSTER_DB", DEFAULT_DB))
    parser.add_argument("--redis-url", default=os.environ.get("RANCH_REDIS_URL", DEFAULT_REDIS))
    parser.add_argument("--redis-prefix", default="ranch-cluster")
    parser.add_argument("--lease", type=float, default=None, help="passed to every replica")
    parser.add_argument(
        "--head-timeout",
        type=float,
        default=HEAD_TIMEOUT,
        help=f"seconds a request's head may take, at HAProxy and at each replica (default {HEAD_TIMEOUT:g})",
    )
    parser.add_argument(
        "--max-connections-per-address",
        type=int,
        default=PER_ADDRESS,
        help=f"connections one client address may hold at HAProxy (default {PER_ADDRESS})",
    )
    parser.add_argument(
        "--logs", default="", help="folder for the replicas' and HAProxy's logs (default: a new one)"
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    args = parser.parse_args(argv)
    if args.replicas < 1:
        parser.error(f"--replicas {args.replicas}: at least 1")
    if not args.head_timeout > 0:
        parser.error(f"--head-timeout {args.head_timeout:g}: more than 0 seconds")
    if args.max_connections_per_address < 1:
        parser.error(f"--max-connections-per-address {args.max_connections_per_address}: at least 1")
    if not args.db.startswith("postgresql"):
        parser.error(
            f"--db {args.db}: replicas on several machines share PostgreSQL (a postgresql+asyncpg:// URL)"
        )
    return args, extra


def main(argv: Sequence[str] | None = None) -> int:
    args, extra = parse(argv)
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(haproxy).exists():
        print("cluster: HAProxy is missing; `make haproxy` installs it (apt-get)", file=sys.stderr)
        return 2
    asyncio.run(ensure_database(args.db))
    ports = [int(p) for p in args.replica_ports.split(",") if p] or [
        args.port + 1 + n for n in range(args.replicas)
    ]
    logs = Path(args.logs or tempfile.mkdtemp(prefix="ranch-cluster-"))
    logs.mkdir(parents=True, exist_ok=True)
    children: list[subprocess.Popen[bytes]] = []
    stopping = False

    def stop(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        for n, port in enumerate(ports, start=1):  # one by one: the first applies the migrations
            children.append(replica(args, extra, port, logs / f"replica-{n}.log"))
            wait_healthy(f"http://{HOST}:{port}/healthz", children[-1], logs / f"replica-{n}.log")
        servers = "\n".join(
            f"    server replica-{n} {HOST}:{port} check" for n, port in enumerate(ports, start=1)
        )
        (logs / "haproxy.cfg").write_text(
            HAPROXY_CONFIG.format(
                host=HOST,
                port=args.port,
                servers=servers,
                head_timeout=f"{args.head_timeout:g}",
                per_address=args.max_connections_per_address,
            )
        )
        balancer = spawn([haproxy, "-db", "-f", str(logs / "haproxy.cfg")], logs / "haproxy.log")
        children.append(balancer)
        wait_healthy(f"http://{HOST}:{args.port}/healthz", balancer, logs / "haproxy.log")
        print(f"ranch cluster: http://{HOST}:{args.port}  ({len(ports)} replicas behind HAProxy)")
        print(f"  logs and haproxy.cfg in {logs}")
        for n, (port, child) in enumerate(zip(ports, children, strict=False), start=1):
            print(f"  replica-{n}: http://{HOST}:{port}  pid {child.pid}")
        print("  Ctrl-C stops them all", flush=True)
        gone: set[int] = set()
        while not stopping and balancer.poll() is None:
            for n, child in enumerate(children[:-1], start=1):  # poll() reaps a replica that died
                if n not in gone and child.poll() is not None:
                    gone.add(n)
                    print(
                        f"  replica-{n} (pid {child.pid}) exited ({child.returncode}); the others take over",
                        flush=True,
                    )
            time.sleep(0.2)
        if balancer.poll() is not None and not stopping:
            print(
                f"cluster: HAProxy stopped (exit {balancer.returncode}); see {logs / 'haproxy.log'}",
                file=sys.stderr,
            )
            return 1
        return 0
    except ClusterError as exc:
        print(f"cluster: {exc}", file=sys.stderr)
        return 1
    finally:
        for child in reversed(children):
            if child.poll() is None:
                child.terminate()
        for child in children:
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()


class ClusterError(Exception):
    """A replica or HAProxy did not start."""


def replica(args: argparse.Namespace, extra: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "ranch", "serve", *([args.config] if args.config else [])]
    command += ["--host", HOST, "--port", str(port), "--db", args.db]
    command += ["--redis-url", args.redis_url, "--redis-prefix", args.redis_prefix]
    # X-Forwarded-For is believed from HAProxy only, which sets it; HAProxy caps addresses itself
    command += ["--forwarded-allow-ips", HOST, "--header-timeout", f"{args.head_timeout:g}"]
    if args.lease is not None:
        command += ["--lease", str(args.lease)]
    os.environ.setdefault("RANCH_CLUSTER_SECRET", secrets.token_hex(32))  # one per cluster, inherited
    return spawn([*command, *extra], log)


def spawn(command: list[str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(url: str, child: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP
    with httpx.Client(timeout=2) as client:
        while time.monotonic() < deadline:
            if child.poll() is not None:
                raise ClusterError(f"{' '.join(child.args)} exited ({child.returncode}):\n{tail(log)}")  # type: ignore[arg-type]
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
    raise ClusterError(f"{url} did not answer within {STARTUP:.0f} s:\n{tail(log)}")


def tail(log: Path, lines: int = 20) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""


async def ensure_database(url: str) -> None:
    """Create the database the URL names when the server does not have it yet."""
    import asyncpg  # ranch's PostgreSQL driver

    parts = urlsplit(url.replace("postgresql+asyncpg://", "postgresql://", 1))
    name = parts.path.lstrip("/")
    server = urlunsplit(parts._replace(path="/postgres"))
    connection = await asyncpg.connect(server)
    try:
        if not await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()


if __name__ == "__main__":
    sys.exit(main())
