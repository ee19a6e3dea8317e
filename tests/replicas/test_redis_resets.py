"""Redis resetting its connections, repeatedly, under load, does not break a replica.

Two `ranch serve` processes (uvloop, as in production) share a SQLite database and a Redis prefix;
the first reaches Redis through a TCP proxy that the test cuts (every connection reset, new ones
too) and restores, three times, while callers keep sending A2A team turns and REST room posts to
it. Every request must be answered without an internal error (rate limits and sessions let
requests through while Redis is down: docs/policies.md), `/healthz` must say when the fan-out is
reconnecting and when it is back, and after the cuts both replicas' watchers must see what is
posted on the other (the fan-out reconnected). Redis (127.0.0.1:6379) is needed: without it this
test fails, saying so.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
import redis

from _support import TESTS
from _support.hubkit import ADMIN_KEY, Api, Live, wait_until
from _support.servers import ServerProcess, free_port
from _support.tcpproxy import TcpProxy
from ranch._version import __version__ as VERSION
from ranch.config import parse_config
from ranch.hub.app import Settings, create_app

REDIS_PORT = 6379
CALLERS = 4
"""Threads sending requests to the replica behind the proxy, all along."""
CUTS = 3
PER_PHASE = 6
"""Requests answered while Redis is cut, and again after each restore, before the test goes on."""
PHASE = 30.0
"""Seconds a phase may take on a loaded machine."""
SECRET = "a-cluster-secret-for-the-test"


def serve(database_url: str, redis_url: str, prefix: str, log: Path) -> ServerProcess:
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", "--port", str(port), "--db", database_url]
    command += ["--redis-url", redis_url, "--redis-prefix", prefix, "--caller-rate", "500"]
    env = {
        **os.environ,
        "PYTHONPATH": str(TESTS),
        "RANCH_ADMIN_KEY": ADMIN_KEY,
        "RANCH_CLUSTER_SECRET": SECRET,
    }
    return ServerProcess(command, port, env=env, log_path=log.with_suffix(f".{port}.log"))


def health(url: str) -> tuple[int, dict[str, Any]]:
    response = httpx.get(f"{url}/healthz", timeout=10)
    return response.status_code, response.json()


class Load:
    """Callers sending team turns and room posts to one replica until stopped; every answer kept."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: list[tuple[str, int, str]] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._call, args=(n,), daemon=True) for n in range(CALLERS)]

    def _call(self, caller: int) -> None:
        with httpx.Client(timeout=60) as http:
            while not self._stop.is_set():
                self.answers.append(self._turn(http) if caller % 2 else self._post(http, caller))

    def _turn(self, http: httpx.Client) -> tuple[str, int, str]:
        message = {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": "find papers"}]}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        response = http.post(f"{self.url}/a2a/agents/helpdesk", json=body, headers={"A2A-Version": "1.0"})
        error = response.json().get("error") if response.status_code == 200 else None
        return "turn", response.status_code, str(error or "")

    def _post(self, http: httpx.Client, caller: int) -> tuple[str, int, str]:
        url = f"{self.url}/api/v1/rooms/demo/messages"
        response = http.post(url, json={"text": f"caller {caller}"}, headers={"X-API-Key": "rk_demo"})
        return "post", response.status_code, response.text[:200] if response.status_code >= 300 else ""

    def answered(self) -> int:
        return len(self.answers)

    @contextmanager
    def running(self) -> Iterator[Load]:
        for thread in self._threads:
            thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            for thread in self._threads:
                thread.join(timeout=90)

    def failures(self) -> list[tuple[str, int, str]]:
        return [answer for answer in self.answers if answer[1] >= 500 or answer[2] and answer[0] == "turn"]


def answered_more(load: Load, since: int) -> bool:
    return load.answered() >= since + PER_PHASE


def says(text: str, frame: dict[str, Any]) -> bool:
    return bool(frame.get("data", {}).get("text") == text)


def test_a_replica_serves_through_repeated_redis_resets_under_load(tmp_path: Path) -> None:
    try:
        redis.Redis(port=REDIS_PORT, socket_timeout=2).ping()
    except redis.RedisError as exc:
        pytest.fail(f"this test needs Redis at 127.0.0.1:{REDIS_PORT}: {exc}")
    # `ranch serve` runs on uvloop when it is installed (uvicorn's loop "auto"), where a reset
    # surfaces as RuntimeError rather than a RedisError: the case this test is about
    assert importlib.util.find_spec("uvloop") is not None, "uvloop is a dependency of ranch serve"
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    prefix = f"ranch-test-{uuid.uuid4().hex[:8]}"
    with ExitStack() as stack:
        proxy = stack.enter_context(TcpProxy(REDIS_PORT))
        behind = f"redis://127.0.0.1:{proxy.port}/0"
        cut_off = stack.enter_context(serve(database_url, behind, prefix, tmp_path / "behind-proxy"))
        direct = f"redis://127.0.0.1:{REDIS_PORT}/0"
        other = stack.enter_context(serve(database_url, direct, prefix, tmp_path / "direct"))
        assert health(cut_off.url) == (200, {"status": "ok", "version": VERSION, "fanout": "connected"})

        load = Load(cut_off.url)
        with load.running():
            for _ in range(CUTS):
                proxy.cut()
                since = load.answered()
                wait_until(
                    lambda: health(cut_off.url)[1].get("fanout") == "reconnecting",
                    PHASE,
                    "healthz: reconnecting",
                )
                wait_until(partial(answered_more, load, since), PHASE, "requests answered during the cut")
                proxy.restore()
                since = load.answered()
                wait_until(
                    lambda: health(cut_off.url)[1].get("fanout") == "connected", PHASE, "healthz: connected"
                )
                wait_until(
                    partial(answered_more, load, since),
                    PHASE,
                    "requests answered after the restore",
                )
        assert proxy.cuts == CUTS
        assert load.failures() == [], f"{len(load.failures())} of {load.answered()} requests failed"
        assert {kind for kind, _, _ in load.answers} == {"turn", "post"}
        assert cut_off.returncode is None, cut_off.output()[-3000:]
        assert "Exception in ASGI application" not in cut_off.output()
        assert health(cut_off.url) == (200, {"status": "ok", "version": VERSION, "fanout": "connected"})

        # the fan-out delivers again, both ways: what is posted on one replica reaches the other's watcher
        for watched, posted in ((cut_off, other), (other, cut_off)):
            watcher = Live(watched.url, ADMIN_KEY)
            watcher.subscribe(["demo"])
            text = f"after the cuts, on {posted.url}"
            Api(posted.url, ADMIN_KEY).post("/rooms/demo/messages", {"text": text})
            watcher.until(partial(says, text), timeout=PHASE)
            watcher.close()


@pytest.mark.anyio
async def test_when_the_hubs_background_work_dies_healthz_answers_503_with_the_reason(tmp_path: Path) -> None:
    """A load balancer must stop sending requests to a hub whose task group failed: from then on
    every request would fail. (`ranch serve` also stops the process then: exit 1.)"""
    config = parse_config("agents:\n  - {id: echo, kind: echo}\n")
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    app = create_app(
        config, Settings(database_url=database_url, admin_key=ADMIN_KEY, announce=lambda _: None)
    )
    hub = app.state.hub

    async def dies() -> None:
        raise RuntimeError("a bug in a background task")

    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://hub") as http:
        assert (await http.get("/healthz")).status_code == 503  # not started
        with pytest.raises(ExceptionGroup):
            async with app.router.lifespan_context(app):
                assert (await http.get("/healthz")).json()["status"] == "ok"
                hub.core.group.start_soon(dies)
                with anyio.fail_after(10):
                    await anyio.sleep_forever()  # until the failed group cancels the hub
        answer = await http.get("/healthz")
    assert answer.status_code == 503
    assert answer.json()["status"] == "unavailable"
    assert "RuntimeError" in answer.json()["reason"]
