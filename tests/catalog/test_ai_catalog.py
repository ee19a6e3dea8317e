"""The AI catalog at /.well-known/ai-catalog.json: every agent and team the caller may see, in the
AI Catalog draft's format (typed entries naming each card), with /a2a/agents' filters and caching."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from _support.hubkit import ADMIN_KEY, Api, serve_ranch

CONFIG = """
agents:
  - id: researcher
    kind: rules
    skills: [{id: papers, name: Paper search, tags: [research]}]
    rules: [{reply: "found"}]
  - {id: echo, kind: echo}
teams:
  - {id: desk, members: [researcher, echo], default_agent: researcher}
"""


def catalog(url: str, key: str = "", **params: str) -> dict[str, Any]:
    answer = httpx.get(
        f"{url}/.well-known/ai-catalog.json",
        params=params,
        headers={"X-API-Key": key} if key else {},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def ids(document: dict[str, Any]) -> set[str]:
    return {entry["extensions"]["ranch"]["id"] for entry in document["entries"]}


def test_the_catalog_lists_every_agent_by_its_card_with_filters(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "d.db") as hub:
        document = catalog(hub.url)
        host = hub.url.removeprefix("http://")
        assert document["specVersion"] == "0.9"
        assert document["host"]["identifier"] == host
        by_id = {entry["extensions"]["ranch"]["id"]: entry for entry in document["entries"]}
        assert set(by_id) == {"researcher", "echo", "desk"}
        researcher = by_id["researcher"]
        assert researcher["identifier"] == f"urn:air:{host}:agent:researcher"
        assert researcher["type"] == "application/a2a-agent-card+json"
        assert researcher["tags"] == ["research"]
        assert by_id["desk"]["extensions"]["ranch"]["kind"] == "team"
        card = httpx.get(researcher["url"], timeout=10)
        assert card.status_code == 200 and card.json()["name"] == "researcher"
        assert ids(catalog(hub.url, tag="research")) == {"researcher", "desk"}
        assert ids(catalog(hub.url, mode="image/png")) == {"echo", "desk"}  # desk answers with what echo may
        inline = catalog(hub.url, cards="inline", skill="paper")
        assert {entry["data"]["name"] for entry in inline["entries"]} == {"researcher", "desk"}
        assert all("url" not in entry for entry in inline["entries"])  # exactly one of url and data
        refused = httpx.get(f"{hub.url}/.well-known/ai-catalog.json", params={"tag": ""}, timeout=10)
        assert refused.status_code == 400 and refused.json()["error"]["field"] == "tag"
        first = httpx.get(f"{hub.url}/.well-known/ai-catalog.json", timeout=10)
        assert first.headers["cache-control"] == "public, max-age=300" and first.headers["last-modified"]
        again = httpx.get(
            f"{hub.url}/.well-known/ai-catalog.json",
            headers={"If-None-Match": first.headers["etag"]},
            timeout=10,
        )
        assert again.status_code == 304


def test_the_catalog_shows_each_caller_what_they_may_see(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'k.db'}", auth="keys") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        acme_key = admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]
        Api(hub.url, acme_key).post(
            "/agents", {"id": "scout", "kind": "rules", "visibility": "org", "rules": [{"reply": "scouted"}]}
        )
        assert ids(catalog(hub.url)) == {"researcher", "echo", "desk"}  # anonymous: the global ones
        assert ids(catalog(hub.url, ADMIN_KEY)) == {"researcher", "echo", "desk"}
        assert ids(catalog(hub.url, acme_key)) == {"researcher", "echo", "desk", "acme.scout"}
        wrong = httpx.get(
            f"{hub.url}/.well-known/ai-catalog.json", headers={"X-API-Key": "rk_no"}, timeout=10
        )
        assert wrong.status_code == 401
        keyed = httpx.get(
            f"{hub.url}/.well-known/ai-catalog.json", headers={"X-API-Key": acme_key}, timeout=10
        )
        assert keyed.headers["cache-control"].startswith("private")
