"""Helpers for the hub's tests: a database on SQLite or PostgreSQL, a served hub, REST and WebSocket clients.

`database_url` is parametrized: every test that uses it runs on a fresh SQLite file
and on a fresh PostgreSQL database at 127.0.0.1:5432. PostgreSQL is required: when
it cannot be reached the test fails and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from conftest import RunningRanch
from ranch.config import parse_config
from ranch.hub.app import Settings, create_app
from servers import ServerThread, bind_socket

ADMIN_KEY = "rk_test_admin"
POSTGRES_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


async def _postgres(statement: str) -> None:
    import asyncpg

    connection = await asyncpg.connect(POSTGRES_ADMIN, timeout=5)
    try:
        await connection.execute(statement)
    finally:
        await connection.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
        return
    name = f"ranch_test_{uuid.uuid4().hex[:12]}"
    try:
        asyncio.run(_postgres(f'CREATE DATABASE "{name}"'))
    except (TimeoutError, OSError) as exc:
        pytest.fail(f"this test needs PostgreSQL at 127.0.0.1:5432 (user postgres, trust auth): {exc}")
    try:
        yield f"postgresql+asyncpg://postgres@127.0.0.1:5432/{name}"
    finally:
        asyncio.run(_postgres(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextlib.contextmanager
def serve_hub(config: str, database_url: str, **settings: Any) -> Iterator[RunningRanch]:
    """A ranch server with rooms, its admin key fixed to ADMIN_KEY."""
    parsed = parse_config(config)
    options: dict[str, Any] = {"admin_key": ADMIN_KEY, "announce": lambda _line: None, **settings}
    app = create_app(parsed, Settings(database_url=database_url, **options))
    with ServerThread(app, sock=bind_socket(), name="hub") as server:
        yield RunningRanch(url=server.url, config=parsed, server=server, database_url=database_url)


class Api:
    """REST calls as one key holder; `call` returns the response, the others assert success."""

    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url
        self.headers = {"X-API-Key": key} if key else {}

    def call(self, method: str, path: str, body: Any = None, **params: Any) -> httpx.Response:
        """One request on its own connection (nothing to close, nothing leaked between tests)."""
        url = f"{self.base_url}/api/v1{path}"
        return httpx.request(method, url, json=body, params=params or None, headers=self.headers, timeout=30)

    def raw(self, method: str, path: str, content: bytes) -> httpx.Response:
        headers = {**self.headers, "Content-Type": "application/json"}
        return httpx.request(
            method, f"{self.base_url}/api/v1{path}", content=content, headers=headers, timeout=30
        )

    def get(self, path: str, **params: Any) -> Any:
        response = self.call("GET", path, **params)
        assert response.status_code == 200, response.text
        return response.json()

    def post(self, path: str, body: Any, status: int = 201) -> Any:
        response = self.call("POST", path, body)
        assert response.status_code == status, response.text
        return response.json() if response.content else None

    def messages(self, room: str) -> list[dict[str, Any]]:
        return list(self.get(f"/rooms/{room}/messages", limit=200)["items"])

    def executions(self, room: str) -> dict[str, dict[str, Any]]:
        """The newest execution per agent."""
        latest: dict[str, dict[str, Any]] = {}
        for row in reversed(self.get(f"/rooms/{room}/executions")["items"]):
            latest[row["agent_id"]] = row
        return latest


def wait_until(check: Callable[[], Any], timeout: float = 15.0, what: str = "condition") -> Any:
    """Poll `check` until it returns something truthy; fail naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


class Live:
    """A WebSocket connection to /api/v1/ws."""

    def __init__(self, base_url: str, key: str) -> None:
        url = base_url.replace("http://", "ws://", 1) + f"/api/v1/ws?token={key}"
        self.connection: ClientConnection = connect(url, open_timeout=10)

    def send(self, frame: dict[str, Any]) -> None:
        self.connection.send(json.dumps(frame))

    def send_raw(self, text: str) -> None:
        self.connection.send(text)

    def recv(self, timeout: float = 10.0) -> dict[str, Any]:
        frame: dict[str, Any] = json.loads(self.connection.recv(timeout=timeout))
        return frame

    def subscribe(self, rooms: list[str], cursor: int = 0) -> dict[str, Any]:
        self.send({"type": "subscribe", "rooms": rooms, "cursor": cursor})
        frame = self.recv()
        assert frame["type"] == "subscribed", frame
        return frame

    def until(self, done: Callable[[dict[str, Any]], bool], timeout: float = 15.0) -> list[dict[str, Any]]:
        """Frames up to and including the first for which `done` is true."""
        frames: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"no matching frame within {timeout}s; got {[f['type'] for f in frames]}"
                )
            frame = self.recv(timeout=left)
            frames.append(frame)
            if done(frame):
                return frames

    def close(self) -> None:
        self.connection.close()
