"""`ranch serve` as a child process a test kills (`kill -9`) and starts again on the same database, and
JSON-RPC calls to it: what the durable-turn tests share."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import httpx

from _support import TESTS
from _support.hubkit import ADMIN_KEY
from _support.replicas import REDIS
from _support.servers import ServerProcess, free_port

LEASE = "1"
"""Seconds (`--lease`) before a killed server's tasks are taken over: short, so tests wait little."""


def killable_serve(config: Path, database_url: str, log: Path, *, redis: str = "") -> ServerProcess:
    """`ranch serve config` on `database_url` with a short lease, private outbound calls allowed (the
    peers are on 127.0.0.1), the admin key set, and with `redis` a Redis prefix shared by replicas."""
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--db", database_url]
    command += ["--lease", LEASE, "--allow-private-outbound"]
    if redis:
        command += ["--redis-url", REDIS, "--redis-prefix", redis]
    env = {**os.environ, "PYTHONPATH": str(TESTS), "RANCH_ADMIN_KEY": ADMIN_KEY}
    return ServerProcess(command, port, env=env, log_path=log.with_suffix(f".{port}.log"))


def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The JSON-RPC `result` of `method` at `url` (A2A 1.0); fails the test on an error answer."""
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer: dict[str, Any] = httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=30).json()
    assert "result" in answer, answer
    result: dict[str, Any] = answer["result"]
    return result
