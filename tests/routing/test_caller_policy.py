"""The human's policy (docs/routing.md, "The caller"): routing members learn who the turn is for,
a team's `access` closes members to some callers, and `approval` members are reached only once
the caller approved the hop: over A2A with API keys (only the same principal answers), and in a
room over REST and the WebSocket."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from a2a.types import GetTaskRequest, Task, TaskState
from a2a.utils.errors import TaskNotFoundError
from google.protobuf.json_format import MessageToDict

from _support import probes
from _support.hubkit import ADMIN_KEY, Api, Live, serve_ranch, wait_until
from _support.sdk import ask, said, sdk_client
from ranch.wire.client_routing import URI

CONFIG = """
agents:
  - id: desk
    kind: rules
    rules:
      - {match: "did not approve", reply: "understood: no finance", route: user, reason: "declined"}
      - {reply: "desk routes", route: finance, reason: "money question"}
  - {id: finance, kind: rules, rules: [{reply: "finance answers", route: user, reason: "done"}]}
  - id: scout
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {reply: "scout routes", route: finance, reason: "to the money"}
  - {id: plain-desk, kind: rules, rules: [{reply: "plain desk"}]}
  - {id: front, kind: rules, rules: [{reply: "front passes it on", route: office, reason: "office knows"}]}
teams:
  - {id: office, members: [desk, finance], default_agent: desk, approval: [finance]}
  - id: vault
    members: [scout, finance]
    default_agent: scout
    access: {finance: {allow: ["role:admin"]}}
  - id: routed
    members: [plain-desk, finance]
    default_agent: plain-desk
    routes: {plain-desk: finance}
    access: {finance: {allow: ["role:owner"]}}
  - id: outer-office
    members: [front, office]
    default_agent: front
"""
INPUT_REQUIRED = TaskState.TASK_STATE_INPUT_REQUIRED
COMPLETED = TaskState.TASK_STATE_COMPLETED


def trail(task: Task) -> list[dict[str, Any]]:
    return list(MessageToDict(task.metadata)[URI]["trail"])


def test_approval_over_a2a_is_answered_by_the_same_caller_only(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        owner_key = admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]
        ann_key = Api(hub.url, owner_key).post("/users", {"id": "ann", "name": "Ann"})["api_key"]

        async def scenario() -> None:
            async with sdk_client(hub.agent_url("office"), headers={"X-API-Key": owner_key}) as owner:
                asked = await ask(owner, "how much is left?")
                assert asked.status.state == INPUT_REQUIRED
                question = said(asked)
                assert question.startswith("Approve sending this to finance? Why: money question.")
                assert "It would receive: desk routes" in question
                approval = MessageToDict(asked.status.message.metadata)["ranch.approval"]
                assert (approval["member"], approval["reason"]) == ("finance", "money question")

                async with sdk_client(hub.agent_url("office"), headers={"X-API-Key": ann_key}) as ann:
                    with pytest.raises(TaskNotFoundError):  # another person cannot answer it
                        await ask(ann, "approve", task_id=asked.id, context_id=asked.context_id)

                done = await ask(owner, "approve", task_id=asked.id, context_id=asked.context_id)
                assert done.status.state == COMPLETED and said(done) == "finance answers"
                hops = trail(done)
                assert [hop["agent"] for hop in hops] == ["desk", "finance"]
                assert hops[1]["reason"] == "done"
                kept = await owner.get_task(GetTaskRequest(id=done.id))
                assert kept.status.state == COMPLETED

                again = await ask(owner, "how much now?")
                assert again.status.state == INPUT_REQUIRED
                unclear = await ask(owner, "hmm, why?", task_id=again.id, context_id=again.context_id)
                assert unclear.status.state == INPUT_REQUIRED  # not an answer: asked again
                denied = await ask(owner, "deny", task_id=again.id, context_id=again.context_id)
                assert denied.status.state == COMPLETED and said(denied) == "understood: no finance"
                edges = [(hop["agent"], hop["recipient"]) for hop in trail(denied)]
                assert edges == [("desk", "finance"), ("desk", "user")]  # back to desk, told of the denial

        anyio.run(scenario)


def test_members_closed_to_a_caller_are_not_offered_nor_reached(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        owner_key = admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]
        probes.RECEIVED.pop("scout", None)

        async def scenario() -> Task:
            async with sdk_client(hub.agent_url("vault"), headers={"X-API-Key": owner_key}) as owner:
                return await ask(owner, "open the vault")

        task = anyio.run(scenario)
        assert task.status.state == COMPLETED
        assert "[ranch] finance is not open to person 'acme.owner' of 'acme'; the turn ended." in said(task)
        request = MessageToDict(probes.RECEIVED["scout"][0].metadata)[URI]
        assert request["caller"] == {
            "id": "acme.owner",
            "organization": "acme",
            "kind": "person",
            "role": "owner",
        }
        assert [card["id"] for card in request["agentCards"]] == []  # finance: closed to an owner here


def test_approval_in_a_room_over_rest_and_the_websocket(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = admin.post("/rooms", {"title": "Office", "participants": [{"kind": "team", "id": "office"}]})[
            "id"
        ]
        live = Live(hub.url, ADMIN_KEY)
        live.subscribe([room])
        admin.post(f"/rooms/{room}/messages", {"text": "@office how much is left?"})
        frames = live.until(lambda f: f["type"] == "approval.requested", timeout=20)
        asked = frames[-1]["data"]
        assert (asked["team"], asked["member"], asked["reason"]) == ("office", "finance", "money question")
        question = next(m for m in admin.messages(room) if m["metadata"].get("ranch.approval"))
        assert question["sender"] == {"kind": "team", "id": "office"}
        admin.post(f"/rooms/{room}/messages", {"text": "@office approve"})
        live.until(
            lambda f: f["type"] == "message.created" and f["data"]["sender"]["id"] == "finance", timeout=20
        )
        live.close()
        wait_until(lambda: admin.execution_status(room, "office") == "ready", what="the team ready again")


def test_a_static_route_to_a_closed_member_and_a_role_of_another_organization_are_refused(
    database_url: str,
) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        acme_owner = admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]

        async def asks(key: str) -> Task:
            async with sdk_client(hub.agent_url("routed"), headers={"X-API-Key": key}) as client:
                return await ask(client, "route me")

        theirs = anyio.run(asks, acme_owner)  # an owner, but of acme: `role:owner` is the team's own org's
        assert "[ranch] finance is not open to person 'acme.owner' of 'acme'; the turn ended." in said(theirs)
        assert [hop["agent"] for hop in trail(theirs)] == ["plain-desk"]
        ours = anyio.run(asks, ADMIN_KEY)  # the default organization's owner: the static route is followed
        assert [hop["agent"] for hop in trail(ours)] == ["plain-desk", "finance"], said(ours)


def test_a_member_teams_approval_is_asked_through_the_outer_team(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:

        async def scenario() -> None:
            async with sdk_client(hub.agent_url("outer-office")) as client:
                asked = await ask(client, "how much?")
                assert asked.status.state == INPUT_REQUIRED
                approval = MessageToDict(asked.status.message.metadata)["ranch.approval"]
                assert approval["member"] == "finance" and said(asked).startswith(
                    "Approve sending this to finance?"
                )
                done = await ask(client, "approve", task_id=asked.id, context_id=asked.context_id)
                assert done.status.state == COMPLETED and said(done) == "finance answers"
                nested = trail(done)[-1]
                assert nested["agent"] == "office" and [h["agent"] for h in nested["trail"]] == [
                    "desk",
                    "finance",
                ]

        anyio.run(scenario)
