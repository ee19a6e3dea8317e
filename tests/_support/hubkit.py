"""A served ranch (agents, teams and rooms), its REST and WebSocket clients, and bounded polling.

`serve_ranch` is the one way tests start ranch in-process: uvicorn in a thread on 127.0.0.1, the
tasks and rooms in a SQLite file or any database URL (the `database_url` fixture gives SQLite and
PostgreSQL), the bootstrap admin's key fixed to ADMIN_KEY.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from _support import databases
from _support.servers import ServerThread, bind_socket
from ranch.config import RanchConfig, parse_config
from ranch.hub.app import Settings, create_app

ADMIN_KEY = "rk_test_admin"


@dataclass
class RunningRanch:
    """A ranch app served on 127.0.0.1 by uvicorn in a thread."""

    url: str
    config: RanchConfig
    server: ServerThread
    database_url: str

    def agent_url(self, agent_id: str) -> str:
        return f"{self.url}/a2a/agents/{agent_id}"


@contextlib.contextmanager
def serve_ranch(config: str | RanchConfig, database: Path | str, **settings: Any) -> Iterator[RunningRanch]:
    """Serve `config` (YAML text or a parsed config); `database` is a SQLite file or a database URL.

    A SQLite file that does not exist yet starts as a copy of the migrated template (`databases`),
    so the server finds nothing to migrate (tests/db/test_migrations.py starts on empty ones).
    `settings` are `Settings` fields; the admin key defaults to ADMIN_KEY and start-up notices
    are not printed.
    """
    databases.seed(database)
    parsed = parse_config(config) if isinstance(config, str) else config
    database_url = f"sqlite+aiosqlite:///{database}" if isinstance(database, Path) else database
    options: dict[str, Any] = {"admin_key": ADMIN_KEY, "announce": lambda _line: None, **settings}
    app = create_app(parsed, Settings(database_url=database_url, **options))
    with ServerThread(app, sock=bind_socket(), name="ranch") as server:
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

    def execution_status(self, room: str, agent: str) -> str | None:
        """The status of `agent`'s newest execution in `room`; None before it has one (the row
        is written when its first message is delivered, just after the post is answered)."""
        row = self.executions(room).get(agent)
        return None if row is None else str(row["status"])


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


async def eventually(check: Callable[[], Any], within: float = 15.0, what: str = "condition") -> Any:
    """`wait_until` for async tests: polls without holding up the event loop the test runs on."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within}s waiting for {what}")
        await anyio.sleep(0.02)


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
        """The deprecated form: a list of rooms, one cursor for them all (still served until 0.2.0)."""
        self.send({"type": "subscribe", "rooms": rooms, "cursor": cursor})
        frame = self.recv()
        assert frame["type"] == "subscribed", frame
        return frame

    def subscribe_from(self, cursors: dict[str, int]) -> dict[str, Any]:
        """Each room after its own cursor (room id -> the last cursor seen there); the `subscribed` frame."""
        self.send({"type": "subscribe", "rooms": cursors})
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

    def until_closed(self, timeout: float) -> tuple[list[dict[str, Any]], int | None]:
        """Every frame the server sends before it closes the socket, and the close code; fails if
        it is still open after `timeout` s."""
        frames: list[dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"the socket is still open after {timeout} s; got {frames}"
            try:
                frames.append(self.recv(timeout=left))
            except ConnectionClosed as closed:
                return frames, closed.rcvd.code if closed.rcvd else None
            except TimeoutError:
                continue

    def close(self) -> None:
        self.connection.close()


@contextlib.contextmanager
def sqlite_locked(database: Path) -> Iterator[None]:
    """Hold the SQLite file's write lock from another connection, as another process could."""
    connection = sqlite3.connect(database, timeout=5, isolation_level=None)
    try:
        connection.execute("BEGIN EXCLUSIVE")
        yield
        connection.execute("ROLLBACK")
    finally:
        connection.close()


def send_text(url: str, text: str, context_id: str, *, task_id: str = "", key: str = "") -> dict[str, Any]:
    """A JSON-RPC SendMessage of `text` to the agent at `url`, as a plain HTTP client sends it (in
    `context_id`, continuing `task_id`, with `key`); asserts it was answered and returns the task."""
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "contextId": context_id,
        "parts": [{"text": text}],
    }
    if task_id:
        message["taskId"] = task_id
    headers = {"A2A-Version": "1.0", **({"X-API-Key": key} if key else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    answer = httpx.post(url, json=body, headers=headers, timeout=30)
    assert answer.status_code == 200 and "result" in answer.json(), answer.text
    task: dict[str, Any] = answer.json()["result"]["task"]
    return task


def reply_text(task: dict[str, Any]) -> str:
    """The text of a task's status message (JSON), its parts joined by newlines."""
    return "\n".join(part.get("text", "") for part in task["status"]["message"]["parts"])


def events_of(api: Api, room: str, since: int = 0) -> list[dict[str, Any]]:
    """The room's events after `since`, as `GET /rooms/{id}/events` lists them (every page)."""
    found: list[dict[str, Any]] = []
    while True:
        page = api.get(f"/rooms/{room}/events", since=since, limit=200)
        found += page["items"]
        if page["next_cursor"] is None:
            return found
        since = int(page["next_cursor"])
