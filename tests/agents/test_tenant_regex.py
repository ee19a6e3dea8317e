"""A tenant's `rules` regexes run on RE2, in linear time: none can freeze the server.

The server runs as its own process, so a regex that backtracks for hours (the behaviour
before RE2) fails the test at the client's deadline instead of freezing the test run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from _support.servers import ranch_serve_process

ADMIN = "rk_test_admin_regex_0123456789"
CONFIG = """
agents:
  - id: ops
    kind: rules
    rules:
      - {match: "^(?=ops)(?P<word>\\\\w+)", reply: "lookaheads are fine in the operator's config: {word}"}
      - {reply: "ops heard: {text}"}
"""
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    """One server for the module: every refused registration leaves it as it was."""
    tmp_path = tmp_path_factory.mktemp("regex")
    with ranch_serve_process(tmp_path, CONFIG, "--auth", "keys", admin_key=ADMIN) as server:
        created = httpx.post(
            f"{server.url}/api/v1/organizations",
            json={"id": "acme"},
            headers={"X-API-Key": ADMIN},
            timeout=30,
        )
        assert created.status_code == 201, created.text
        yield server.url, {"X-API-Key": created.json()["owner"]["api_key"]}


def register(url: str, key: dict[str, str], agent_id: str, rules: list[dict[str, Any]]) -> httpx.Response:
    body = {"id": agent_id, "kind": "rules", "rules": rules}
    return httpx.post(f"{url}/api/v1/agents", json=body, headers=key, timeout=30)


def ask(url: str, key: dict[str, str], agent_id: str, text: str) -> str:
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    # a generous deadline: linear matching answers at once; the old backtracking took hours
    answer = httpx.post(f"{url}/a2a/agents/{agent_id}", json=body, headers={**V1, **key}, timeout=20)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["result"]["message"]["parts"][0]["text"])


def test_a_catastrophic_pattern_from_a_tenant_answers_a_40_character_input(
    served: tuple[str, dict[str, str]],
) -> None:
    url, key = served
    rules = [
        {"match": "^(a+)+$", "reply": "all a"},
        {"match": "(?i)^(?P<first>A)", "reply": "starts with {first}"},
    ]
    assert register(url, key, "slowrules", rules).status_code == 201
    assert ask(url, key, "acme.slowrules", "a" * 39 + "b") == "starts with a"  # the organization's own id
    assert ask(url, key, "acme.slowrules", "a" * 40) == "all a"
    assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200


@pytest.mark.parametrize(
    ("match", "why"),
    [
        ("(?=admin)\\w+", "lookarounds"),
        ("(a)\\1", "backreferences"),
        ("a" * 1001, "longer than 1000 characters"),
    ],
)
def test_a_pattern_re2_cannot_run_is_refused_naming_the_field(
    served: tuple[str, dict[str, str]], match: str, why: str
) -> None:
    url, key = served
    refused = register(
        url,
        key,
        "lookahead",
        [{"reply": "fine"}, {"match": "ok", "reply": "ok"}, {"match": match, "reply": "x"}],
    )
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "UNPROCESSABLE" and error["field"] == "rules[2].match"
    assert why in error["message"]
    first = register(url, key, "lookahead", [{"match": match, "reply": "x"}]).json()["error"]
    assert first["field"] == "rules[0].match"
    # nothing was registered, and the operator's config keeps Python's `re` (lookaheads included)
    assert httpx.get(f"{url}/api/v1/agents/acme.lookahead", headers=key, timeout=30).status_code == 404
    assert ask(url, key, "ops", "ops rule") == "lookaheads are fine in the operator's config: ops"
