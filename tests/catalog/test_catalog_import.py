"""`POST /api/v1/agents/import` registers the agents another domain's AI catalog publishes, each as
a remote agent through the outbound URL guard, and reports what was added and what was refused;
here the catalog is another ranch's, served on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import httpx

from _support.hubkit import ADMIN_KEY, Api, serve_ranch

PUBLISHER = """
agents:
  - id: researcher
    kind: rules
    skills: [{id: papers, name: Papers, tags: [research]}]
    rules: [{reply: "found"}]
  - {id: writer, kind: rules, rules: [{reply: "drafted"}]}
"""
IMPORTER = """
agents:
  - {id: echo, kind: echo}
"""


def test_importing_another_ranchs_catalog_registers_its_agents(tmp_path: Path) -> None:
    with (
        serve_ranch(PUBLISHER, tmp_path / "p.db") as publisher,
        serve_ranch(IMPORTER, tmp_path / "i.db", allow_private_outbound=True) as hub,
    ):
        admin = Api(hub.url, ADMIN_KEY)
        acme_key = admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]
        acme = Api(hub.url, acme_key)
        catalog_url = f"{publisher.url}/.well-known/ai-catalog.json"
        report = acme.post("/agents/import", {"catalog_url": catalog_url}, status=200)
        assert {agent["id"] for agent in report["added"]} == {"acme.researcher", "acme.writer"}
        assert report["refused"] == []
        added = {agent["id"]: agent for agent in report["added"]}
        assert added["acme.researcher"]["url"] == publisher.agent_url("researcher")
        assert added["acme.researcher"]["kind"] == "remote"
        rpc = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "papers?"}]}},
        }
        headers = {"A2A-Version": "1.0", "X-API-Key": acme_key}
        answer = httpx.post(hub.agent_url("acme.researcher"), json=rpc, headers=headers, timeout=30)
        assert '"found"' in answer.text, answer.text  # answered by the publisher, through the importer

        again = acme.post("/agents/import", {"catalog_url": f"{catalog_url}?tag=research"}, status=200)
        assert again["added"] == []
        (refused,) = again["refused"]
        assert refused["identifier"].endswith(":agent:researcher") and "taken" in refused["reason"]

        member = acme.call("POST", "/agents/import", {"catalog_url": "ftp://example.com/x"})
        assert member.status_code == 400 and member.json()["error"]["field"] == "catalog_url"


def test_the_outbound_url_guard_judges_the_catalog_url(tmp_path: Path) -> None:
    with (
        serve_ranch(PUBLISHER, tmp_path / "p.db") as publisher,
        serve_ranch(IMPORTER, tmp_path / "i.db") as hub,  # private addresses are not allowed
    ):
        admin = Api(hub.url, ADMIN_KEY)
        acme = Api(hub.url, admin.post("/organizations", {"id": "acme"})["owner"]["api_key"])
        answer = acme.call(
            "POST", "/agents/import", {"catalog_url": f"{publisher.url}/.well-known/ai-catalog.json"}
        )
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["field"] == "catalog_url"
        assert not [item for item in acme.get("/agents")["items"] if item["id"].startswith("acme.")]
