"""Seed 003's card paths: options B (/api/v1/agents/{id}/.well-known/agent-card.json) and C
(/.well-known/a2a/agents/{id}.json) serve option A's card under the same visibility rules, and a hub
without `--root` answers /.well-known/agent-card.json with its own card, a pointer to its catalog."""

from __future__ import annotations

from pathlib import Path

import httpx

from _support.hubkit import ADMIN_KEY, Api, serve_ranch

CONFIG = """
agents:
  - {id: greeter, kind: rules, skills: [{id: greet, name: Greeting, tags: [hello]}], rules: [{reply: "hi"}]}
  - {id: echo, kind: echo}
"""


def paths(agent: str) -> list[str]:
    return [
        f"/a2a/agents/{agent}/.well-known/agent-card.json",
        f"/api/v1/agents/{agent}/.well-known/agent-card.json",
        f"/.well-known/a2a/agents/{agent}.json",
    ]


def get(url: str, key: str = "") -> httpx.Response:
    return httpx.get(url, headers={"X-API-Key": key} if key else {}, timeout=10)


def test_options_b_and_c_serve_option_as_card(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "d.db") as hub:
        answers = [get(hub.url + path) for path in paths("greeter")]
        assert [answer.status_code for answer in answers] == [200, 200, 200]
        assert answers[0].json()["name"] == "greeter"
        assert answers[1].json() == answers[0].json() == answers[2].json()
        assert len({answer.headers["etag"] for answer in answers}) == 1  # one card, one version
        for path in paths("nobody"):
            missing = get(hub.url + path)
            assert missing.status_code == 404, path


def test_the_hub_serves_its_own_card_without_root(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "d.db") as hub:
        answer = get(f"{hub.url}/.well-known/agent-card.json")
        assert answer.status_code == 200
        card = answer.json()
        assert card["name"] == "ranch hub"
        assert card["documentationUrl"] == f"{hub.url}/.well-known/ai-catalog.json"
        assert {i["url"] for i in card["supportedInterfaces"]} == {f"{hub.url}/a2a"}
        assert "etag" in answer.headers and "cache-control" in answer.headers
    with serve_ranch(CONFIG, tmp_path / "r.db", root="echo") as rooted:  # `--root` keeps its agent's card
        assert get(f"{rooted.url}/.well-known/agent-card.json").json()["name"] == "echo"


def test_every_path_keeps_an_organizations_agent_to_its_callers(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, f"sqlite+aiosqlite:///{tmp_path / 'k.db'}", auth="keys") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        acme_key = admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]
        Api(hub.url, acme_key).post(
            "/agents", {"id": "scout", "kind": "rules", "visibility": "org", "rules": [{"reply": "scouted"}]}
        )
        for path in paths("acme.scout"):
            assert get(hub.url + path, acme_key).status_code == 200, path
            assert get(hub.url + path).status_code == 404, path  # anonymous: not there
            assert get(hub.url + path, ADMIN_KEY).status_code == 404, path  # another organization
            assert get(hub.url + path, "rk_wrong").status_code == 401, path  # a key presented is checked
        public = get(hub.url + paths("greeter")[2])
        assert public.status_code == 200
        assert public.headers["cache-control"].startswith("private")
