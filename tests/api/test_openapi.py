"""The OpenAPI 3.1 document of /api/v1 tells the truth about the served API.

It lists exactly the REST routes the app serves, every schema in it is valid JSON Schema, and
the real answers of a session of calls (successes and errors) validate against the schemas it
documents for their status.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator, FormatChecker
from starlette.routing import BaseRoute, Mount, Route

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, serve_ranch, wait_until
from ranch.config import parse_config
from ranch.hub.app import Settings, create_app

CONFIG = """
agents:
  - {id: greeter, kind: echo}
"""
METHODS = ("get", "post", "patch", "put", "delete")


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    database = tmp_path_factory.mktemp("openapi") / "hub.db"
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{database}", caller_rate=None) as running:
        yield running


@pytest.fixture(scope="module")
def document(hub: RunningRanch) -> dict[str, Any]:
    answer = httpx.get(f"{hub.url}/api/v1/openapi.json", timeout=30)  # no key needed
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    value: dict[str, Any] = answer.json()
    return value


def test_the_document_lists_every_rest_route_the_app_serves(document: dict[str, Any], tmp_path: Path) -> None:
    app = create_app(parse_config(CONFIG), Settings(database_url=f"sqlite+aiosqlite:///{tmp_path / 'x.db'}"))
    served = {
        (path, method.lower())
        for path, route in _walk(app.routes)
        if isinstance(route, Route)
        and path.startswith("/api/v1/")
        and not path.endswith("/.well-known/agent-card.json")  # seed 003 B: a card, not REST
        for method in route.methods or ()
        if method != "HEAD"
    }
    documented = {(path, method) for path, item in document["paths"].items() for method in item}
    assert documented == served
    assert document["openapi"] == "3.1.0"
    names = [item[method]["operationId"] for item in document["paths"].values() for method in item]
    assert len(names) == len(set(names))


def _schemas(value: Any) -> Iterator[dict[str, Any]]:
    """Every schema the document holds: components, bodies, answers, parameters."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "schema" and isinstance(item, dict):
                yield item
            else:
                yield from _schemas(item)
    elif isinstance(value, list):
        for item in value:
            yield from _schemas(item)


def test_every_schema_is_valid_json_schema(document: dict[str, Any]) -> None:
    components = document["components"]["schemas"]
    inline = list(_schemas(document["paths"]))
    assert components and inline
    for schema in [*components.values(), *inline]:
        Draft202012Validator.check_schema(schema)
    for schema in inline:  # every $ref resolves within the document
        for ref in re.findall(r"'\$ref': '#/components/schemas/([^']+)'", repr(schema)):
            assert ref in components, ref
    for path, item in document["paths"].items():
        for method, operation in item.items():
            assert operation["responses"], (path, method)
            if path != "/api/v1/openapi.json":
                assert "401" in operation["responses"] and "429" in operation["responses"], (path, method)


_formats = FormatChecker()


@_formats.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    return not isinstance(value, str) or datetime.fromisoformat(value).tzinfo is not None


class Checked:
    """REST calls whose every answer is validated against the document's schema for its status."""

    def __init__(self, document: dict[str, Any], api: Api, seen: set[tuple[str, str, int]]) -> None:
        self.document, self.api, self.seen = document, api, seen
        """(method, path template, status) of every answer so far."""
        self.templates = [
            (re.compile("^" + re.sub(r"\{\w+\}", "[^/]+", path) + "$"), path) for path in document["paths"]
        ]

    def call(self, method: str, path: str, body: Any = None, status: int | None = None, **params: Any) -> Any:
        answer = self.api.call(method, path, body, **params)
        if status is not None:
            assert answer.status_code == status, answer.text
        template = next(t for pattern, t in self.templates if pattern.match(f"/api/v1{path}"))
        responses = self.document["paths"][template][method.lower()]["responses"]
        assert str(answer.status_code) in responses, (method, template, answer.status_code, answer.text)
        documented = responses[str(answer.status_code)]
        self.seen.add((method, template, answer.status_code))
        if "content" not in documented:
            assert not answer.content, answer.text
            return None
        schema = {
            **documented["content"]["application/json"]["schema"],
            "components": self.document["components"],
        }
        Draft202012Validator(schema, format_checker=_formats).validate(answer.json())
        return answer.json()


def test_real_answers_validate_against_their_documented_schemas(
    hub: RunningRanch, document: dict[str, Any]
) -> None:
    seen: set[tuple[str, str, int]] = set()
    admin = Checked(document, Api(hub.url, ADMIN_KEY), seen)
    admin.call("GET", "/me", status=200)
    org = admin.call("POST", "/organizations", {"id": "acme", "allowed_agent_urls": ["https://"]}, status=201)
    acme = Checked(document, Api(hub.url, org["owner"]["api_key"]), seen)
    acme.call("GET", "/organizations/current", status=200)
    acme.call("PATCH", "/organizations/current", {"name": "Acme"}, status=200)
    acme.call("POST", "/users", {"id": "sam", "name": "Sam", "role": "admin"}, status=201)
    acme.call("GET", "/users", status=200)
    key = acme.call("POST", "/keys", {"owner": {"kind": "user", "id": "sam"}, "expires_in": 600}, status=201)
    acme.call("GET", "/keys", status=200)
    acme.call("POST", f"/keys/{key['key']['id']}/revoke", status=200)
    acme.call("POST", "/agents", {"id": "helper", "kind": "echo", "tools": ["search"]}, status=201)
    scout = acme.call("POST", "/agents", {"id": "scout", "kind": "external"}, status=201)
    acme.call(
        "POST",
        "/agents",
        {"id": "crew", "kind": "team", "members": ["helper"], "default_agent": "helper"},
        status=201,
    )
    acme.call("GET", "/agents", status=200)
    acme.call("GET", "/agents/acme.helper", status=200)
    acme.call("GET", "/agents/greeter", status=200)
    room = acme.call(
        "POST",
        "/rooms",
        {"id": "ops", "title": "Ops", "participants": [{"kind": "agent", "id": "helper"}]},
        status=201,
    )["id"]
    acme.call("GET", "/rooms", status=200, limit=1)
    acme.call("GET", f"/rooms/{room}", status=200)
    acme.call("PATCH", f"/rooms/{room}", {"title": "Ops room", "default_agent": "helper"}, status=200)
    acme.call("POST", f"/rooms/{room}/participants", {"kind": "agent", "id": "scout"}, status=201)
    acme.call("GET", f"/rooms/{room}/participants", status=200)
    acme.call("POST", f"/rooms/{room}/messages", {"text": "@helper hello", "metadata": {"k": 1}}, status=201)
    wait_until(lambda: len(acme.api.messages(room)) == 2, what="the helper's reply")
    acme.call("POST", f"/rooms/{room}/messages", {"text": "@scout are you there?"}, status=201)
    acme.call("GET", f"/rooms/{room}/messages", status=200, limit=1)
    acme.call("GET", f"/rooms/{room}/events", status=200, since=0)
    executions = acme.call("GET", f"/rooms/{room}/executions", status=200)["items"]
    execution = next(row["id"] for row in executions if row["agent_id"] == "acme.scout")
    acme.call("POST", f"/executions/{execution}/handoff", {"agent": "helper", "reason": "echo"}, status=200)
    wait_until(  # the helper answers at once: its result is handed back to scout before anything else
        lambda: acme.api.get(f"/executions/{execution}").get("handoff_to") is None,
        what="the handoff's result",
    )
    acme.call("GET", f"/executions/{execution}", status=200)
    acme.call("GET", f"/executions/{execution}/task", status=200, history_length=1)
    acme.call("POST", f"/executions/{execution}/cancel", status=200)
    acme.call("POST", f"/executions/{execution}/complete", {"reason": "over"}, status=409)
    inbox = Checked(document, Api(hub.url, scout["api_key"]), seen)
    for _ in range(2):  # the message to scout, then the helper's result handed back to it
        delivery = inbox.call("GET", "/agent/messages/next", status=200)
        inbox.call("POST", f"/agent/messages/{delivery['delivery_id']}/ack", status=204)
    inbox.call("GET", "/agent/messages/next", status=204)
    acme.call("DELETE", f"/rooms/{room}/participants/agent/scout", status=204)
    acme.call("DELETE", "/agents/acme.scout", status=204)
    # errors, in the one shape
    acme.call("POST", "/rooms", {"title": 5}, status=400)
    acme.call("POST", "/rooms", {"id": "ops", "title": "again"}, status=409)
    acme.call("GET", "/rooms/nope", status=404)
    acme.call("POST", "/organizations", {"id": "beta"}, status=403)
    acme.call(
        "POST", "/agents", {"id": "far", "kind": "remote", "url": "http://example.invalid/"}, status=422
    )
    catalog = {"catalog_url": f"{hub.url}/.well-known/ai-catalog.json"}  # loopback: the URL guard refuses it
    acme.call("POST", "/agents/import", catalog, status=422)
    acme.call("POST", f"/rooms/{room}/messages", {"text": "x" * 100_001}, status=413)
    acme.call("GET", f"/rooms/{room}/messages", status=400, since=-1)
    message = acme.api.messages(room)[0]["id"]
    acme.call("GET", f"/rooms/{room}/messages/{message}/parts/0", status=404)  # a text part: no bytes
    acme.call("GET", "/replay/configs", status=200)  # none offered (tests/replay/test_replay_api.py replays)
    acme.call("POST", "/replay", {"task_id": "nope", "config": "none"}, status=404)
    Checked(document, Api(hub.url, "rk_wrong"), seen).call("GET", "/me", status=401)
    assert {status for _, _, status in seen} >= {200, 201, 204, 400, 401, 403, 404, 409, 413, 422}
    called = {(method.lower(), template) for method, template, _ in seen}
    operations = {(method, path) for path, item in document["paths"].items() for method in item}
    assert called == operations - {("get", "/api/v1/openapi.json")}  # every operation was called


def _walk(routes: list[BaseRoute], prefix: str = "") -> Iterator[tuple[str, BaseRoute]]:
    """Every route with its full path, those inside mounts too."""
    for route in routes:
        if isinstance(route, Mount):
            yield from _walk(route.routes, prefix + route.path)
        else:
            yield prefix + getattr(route, "path", ""), route
