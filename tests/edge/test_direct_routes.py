"""REST operations served without Starlette's router (api/direct.py) answer as the router does.

The edge matches each REST request against the operation table and calls the operation's endpoint
straight from ASGI; whatever it does not match goes down the full stack. These tests hold the two
roads equal: the same operation and path parameters for every route, the same answers for a session
of calls (successes and errors) on a real server with the direct road on and then off, and what the
direct road leaves to the router.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Mount, Route, Router

from _support.hubkit import ADMIN_KEY, RunningRanch, serve_ranch
from ranch.api.direct import DirectRoutes
from ranch.api.routes import OPERATIONS, PREFIX
from ranch.config import parse_config
from ranch.edge.app import EdgeApp
from ranch.hub.app import Settings, create_app

CONFIG = """
agents:
  - {id: greeter, kind: echo}
"""
VOLATILE = frozenset(
    {"id", "room_id", "created_at", "updated_at", "at", "seq", "cursor", "message_id", "joined_at"}
)
"""Keys whose values differ between two runs of the same calls (new ids, times, counters)."""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    database = tmp_path_factory.mktemp("direct") / "hub.db"
    with serve_ranch(CONFIG, database, auth="keys", caller_rate=None) as running:
        yield running


def _app(hub: RunningRanch) -> EdgeApp:
    app = hub.server.server.config.app
    assert isinstance(app, EdgeApp)
    return app


def test_every_operation_is_matched_with_the_routers_route_and_parameters(tmp_path: Path) -> None:
    app = create_app(parse_config(CONFIG), Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"))
    assert isinstance(app, EdgeApp) and isinstance(app.direct, DirectRoutes)
    [router] = [route.app for route in app.routes if isinstance(route, Mount) and route.path == PREFIX]
    assert isinstance(router, Router)
    for operation in OPERATIONS:
        path, params = _filled(operation.path)
        found = app.direct.match(operation.method, f"{PREFIX}{path}")
        assert found is not None, f"{operation.method} {path}"
        routed, routed_params = _routed(router, operation.method, path)
        assert (found[0].path, found[1]) == (routed, routed_params) == (operation.path, params)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("HEAD", "/api/v1/me"),  # the router answers HEAD for a GET route
        ("GET", "/api/v1/me/"),  # a trailing slash: the router's redirect
        ("GET", "/api/v1/rooms//messages"),  # an empty parameter
        ("GET", "/api/v10/me"),  # another prefix
        ("GET", "/api/v1"),
        ("GET", "/api/v1/openapi.json"),  # the document: the router's own route
        ("PUT", "/api/v1/rooms/r1/messages"),  # a method the path does not take: the router's 405
        ("GET", "/api/v1/rooms/r1/nothing"),
    ],
)
def test_what_no_operation_takes_is_left_to_the_router(tmp_path: Path, method: str, path: str) -> None:
    app = create_app(parse_config(CONFIG), Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"))
    assert isinstance(app, EdgeApp) and app.direct is not None and app.direct(method, path) is None


def test_a_session_of_calls_is_answered_alike_on_both_roads(hub: RunningRanch) -> None:
    app = _app(hub)
    before = app.direct_answers
    direct = _session(hub)
    taken = app.direct_answers - before
    left = {"PUT /rooms/<room>/messages", "HEAD /me", "GET /me/"}  # the router's: 405, HEAD, a redirect
    assert taken == 1 + len(direct) - len(left)  # (1: the room the session made)
    assert left.issubset(call for call, _status, _type, _body in direct)
    saved, app.direct = app.direct, None  # the router serves every call
    try:
        routed = _session(hub)
    finally:
        app.direct = saved
    assert app.direct_answers - before == taken  # none of the second session's took the direct road
    assert direct == routed
    statuses = {status for _call, status, _type, _body in direct}
    assert {200, 201, 204, 400, 404, 409}.issubset(statuses)  # successes and errors alike


def test_a_failure_the_endpoint_does_not_answer_is_a_plain_500_with_its_trace_id(hub: RunningRanch) -> None:
    app = _app(hub)

    async def broken(request: Request) -> Response:
        raise RuntimeError("a bug in an endpoint")

    class Broken:
        prefix = PREFIX

        def __call__(self, method: str, path: str) -> tuple[Any, dict[str, str]] | None:
            return (broken, {}) if path == f"{PREFIX}/me" else None

    saved, app.direct = app.direct, Broken()
    try:
        answer = httpx.get(f"{hub.url}{PREFIX}/me", headers={"X-API-Key": ADMIN_KEY}, timeout=30)
        after = httpx.get(f"{hub.url}{PREFIX}/rooms", headers={"X-API-Key": ADMIN_KEY}, timeout=30)
    finally:
        app.direct = saved
    assert answer.status_code == 500 and answer.text == "Internal Server Error"
    assert answer.headers["x-trace-id"]
    assert after.status_code == 200  # the server goes on


def _session(hub: RunningRanch) -> list[tuple[str, int, str, Any]]:
    """The same calls each time, in a room of their own: (call, status, content type, body without
    the values that change from run to run)."""
    headers = {"X-API-Key": ADMIN_KEY}
    with httpx.Client(base_url=f"{hub.url}{PREFIX}", headers=headers, timeout=30) as http:
        room = http.post("/rooms", json={"title": "roads"}).json()["id"]
        calls: list[tuple[str, str, Any]] = [
            ("GET", "/me", None),
            ("POST", f"/rooms/{room}/messages", {"text": "hello"}),
            ("POST", f"/rooms/{room}/messages", {"text": "hi @greeter"}),
            ("POST", f"/rooms/{room}/messages", {"txt": "a misspelt field"}),
            ("POST", f"/rooms/{room}/messages", {"text": "no", "parts": "not a list"}),
            ("POST", "/rooms/no-such-room/messages", {"text": "hello"}),
            ("GET", f"/rooms/{room}/messages?since=0", None),
            ("GET", f"/rooms/{room}/messages?limit=many", None),
            ("GET", f"/rooms/{room}/events?since=1&limit=2", None),
            ("POST", f"/rooms/{room}/participants", {"kind": "agent", "id": "greeter"}),
            ("POST", f"/rooms/{room}/participants", {"kind": "agent", "id": "greeter"}),
            ("DELETE", f"/rooms/{room}/participants/agent/greeter", None),
            ("DELETE", f"/rooms/{room}/participants/user/nobody", None),
            ("PUT", f"/rooms/{room}/messages", {"text": "hello"}),
            ("HEAD", "/me", None),
            ("GET", "/me/", None),
        ]
        answers = []
        for method, path, body in calls:
            answer = http.request(method, path, json=body, follow_redirects=False)
            shown = (
                _stable(answer.json(), room)
                if answer.content and "json" in answer.headers.get("content-type", "")
                else answer.text
            )
            answers.append(
                (
                    f"{method} {path.replace(room, '<room>')}",
                    answer.status_code,
                    answer.headers.get("content-type", ""),
                    shown,
                )
            )
        return answers


def _stable(value: Any, room: str) -> Any:
    if isinstance(value, dict):
        return {key: _stable(item, room) for key, item in value.items() if key not in VOLATILE}
    if isinstance(value, list):
        return [_stable(item, room) for item in value]
    if isinstance(value, str):
        return value.replace(room, "<room>")
    return value


def _filled(template: str) -> tuple[str, dict[str, str]]:
    """`template` with each parameter given a value of its own."""
    params: dict[str, str] = {}
    parts = []
    for part in template.split("/"):
        if part.startswith("{"):
            params[part[1:-1]] = value = f"v{len(params)}"
            parts.append(value)
        else:
            parts.append(part)
    return "/".join(parts), params


def _routed(router: Router, method: str, path: str) -> tuple[str, dict[str, str]]:
    """The path of the route the router picks for `method` on `path` (under the mount), and its
    parameters."""
    scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}
    for route in router.routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            assert isinstance(route, Route)
            return route.path, child["path_params"]
    raise AssertionError(f"the router takes no {method} {path}")
