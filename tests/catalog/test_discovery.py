"""Agents found by what they can do: `?skill=&tag=&mode=` on `/a2a/agents`, `/api/v1/agents` and
the `/mcp` tool list, matched on the served cards and scoped by the caller's visibility."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import MCPError
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from _support.hubkit import ADMIN_KEY, Api, serve_ranch

CONFIG = """
agents:
  - id: researcher
    kind: rules
    skills: [{id: papers, name: Paper search, tags: [Research, papers]}]
    rules: [{reply: "found: {text}"}]
  - id: writer
    kind: rules
    skills: [{id: drafting, name: Drafting, tags: [writing]}]
    rules: [{reply: "drafted: {text}"}]
  - {id: echo, kind: echo}
teams:
  - {id: desk, members: [researcher, writer], default_agent: researcher}
"""


def a2a_list(url: str, key: str = "", **filters: str) -> set[str]:
    answer = httpx.get(
        f"{url}/a2a/agents", params=filters, headers={"X-API-Key": key} if key else {}, timeout=10
    )
    assert answer.status_code == 200, answer.text
    return {agent["id"] for agent in answer.json()["agents"]}


def test_the_a2a_list_by_skill_tag_and_mode(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "d.db") as hub:
        url = hub.url
        assert a2a_list(url) == {"researcher", "writer", "echo", "desk"}
        # a part of a skill's name, in any case; a team's card lists its members' skills
        assert a2a_list(url, skill="PAPER") == {"researcher", "desk"}
        assert a2a_list(url, skill="drafting") == {"writer", "desk"}  # an id
        assert a2a_list(url, tag="research") == {"researcher", "desk"}
        assert a2a_list(url, tag="resear") == set()  # tags match whole
        assert a2a_list(url, skill="echo") == {"echo"}  # a card without skills lists the agent as one
        assert a2a_list(url, skill="paper", tag="writing") == {"desk"}  # every filter, by any of its skills
        assert a2a_list(url, skill="paper", tag="echo") == set()
        assert a2a_list(url, mode="text/plain") == a2a_list(url, mode="text/*") == a2a_list(url)
        assert a2a_list(url, mode="image/png") == {"echo"}  # echo takes anything (*/*)
        assert a2a_list(url, mode="image/png", skill="paper") == set()
        for name, value in (("skill", ""), ("tag", "x" * 201), ("mode", "text/\x01")):
            refused = httpx.get(f"{url}/a2a/agents", params={name: value}, timeout=10)
            assert refused.status_code == 400 and refused.json()["error"]["field"] == name, refused.text


def test_the_api_list_by_skill_tag_and_mode_within_the_callers_visibility(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        acme_key = admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]
        acme = Api(hub.url, acme_key)
        scout = {"id": "scout", "kind": "rules", "visibility": "org", "rules": [{"reply": "scouted"}],
                 "skills": [{"id": "papers-too", "name": "More papers", "tags": ["research"]}]}  # fmt: skip
        acme.post("/agents", scout)

        def listed(api: Api, **filters: str) -> set[str]:
            return {agent["id"] for agent in api.get("/agents", **filters)["items"]}

        assert listed(admin, tag="research") == {"researcher", "desk"}  # not acme's
        assert listed(acme, tag="research") == {"researcher", "desk", "acme.scout"}
        assert listed(acme, skill="more") == {"acme.scout"}
        assert a2a_list(hub.url, ADMIN_KEY, tag="research") == {"researcher", "desk"}
        assert a2a_list(hub.url, acme_key, tag="research") == {"researcher", "desk", "acme.scout"}
        refused = admin.call("GET", "/agents", skill=" ")
        assert refused.status_code == 400 and refused.json()["error"]["field"] == "skill", refused.text
        assert "skill" in str(admin.get("/openapi.json")["paths"]["/api/v1/agents"]["get"]["parameters"])


def test_the_mcp_tool_list_by_skill(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "d.db") as hub:
        everything, narrowed, answered = anyio.run(_mcp, hub.url)
        refusal = anyio.run(_mcp_refused, hub.url)
    assert {"ask_researcher", "ask_writer", "ask_echo", "ask_desk"} <= everything
    assert narrowed == {"ask_researcher", "ask_desk"}
    assert not answered.is_error  # an agent the filter leaves out is still callable
    assert "skill" in refusal  # a bad filter is an error naming it, not an empty list


async def _mcp_refused(base_url: str) -> str:
    async with Client(streamable_http_client(f"{base_url}/mcp?skill=%20"), cache=None) as client:
        with pytest.raises(MCPError) as refused:
            await client.list_tools()
        return str(refused.value)


async def _mcp(base_url: str) -> tuple[set[str], set[str], Any]:
    names: list[set[str]] = []
    answered = None
    for query in ("", "?skill=paper"):
        async with Client(streamable_http_client(f"{base_url}/mcp{query}"), cache=None) as client:
            names.append({tool.name for tool in (await client.list_tools()).tools})
            if query:
                answered = await client.call_tool("ask_echo", {"message": "still here"})
    return names[0], names[1], answered
