"""Who answers a team's approval question (docs/routing.md, "The caller"): only a person, never an
agent nor an agent's message relayed into the room; only one to whom the member is open; by default
the person who asked or an owner or admin, or the team's `approvers`. Anyone else is refused in the
room, and the turn keeps waiting. The audit's team (N6), served with API keys, over REST and A2A."""

from __future__ import annotations

from typing import Any

import anyio
from a2a.types import TaskState

from _support.hubkit import ADMIN_KEY, Api, serve_ranch, wait_until
from _support.sdk import ask, said, sdk_client

CONFIG = """
agents:
  - {id: desk, kind: rules, rules: [{match: "(?i)pay", reply: "sending to finance: {text}", route: finance, reason: payment}, {reply: "noted: {text}", route: user}]}
  - {id: finance, kind: rules, rules: [{reply: "PAID: {text}", route: user}]}
  - {id: echo, kind: echo}
teams:
  - {id: office, members: [desk, finance], default_agent: desk, approval: [finance], access: {finance: {allow: ["role:admin", "role:owner"]}}}
  - {id: vault, members: [desk, finance], default_agent: desk, approval: {members: [finance], approvers: {users: [bob]}}}
  - {id: safe, members: [desk, finance], default_agent: desk, approval: {members: [finance], approvers: {roles: [owner]}}}
"""  # noqa: E501


class Room:
    """The audit's room: the superuser's, with alice (an admin), bob (a member), the external agent
    bot, echo and the teams."""

    def __init__(self, url: str) -> None:
        self.admin = Api(url, ADMIN_KEY)
        self.alice = self.user("alice", "admin")
        self.bob = self.user("bob", "member")
        self.bot = Api(url, self.admin.post("/agents", {"id": "bot", "kind": "external"})["api_key"])
        participants = [{"kind": "team", "id": team} for team in ("office", "vault", "safe")] + [
            {"kind": "user", "id": "alice"},
            {"kind": "user", "id": "bob"},
            {"kind": "agent", "id": "bot"},
            {"kind": "agent", "id": "echo"},
        ]
        self.id = self.admin.post("/rooms", {"title": "ops", "participants": participants})["id"]

    def user(self, name: str, role: str) -> Api:
        created = self.admin.post("/users", {"id": name, "name": name.title(), "role": role})
        return Api(self.admin.base_url, created["api_key"])

    def post(self, who: Api, text: str) -> None:
        who.post(f"/rooms/{self.id}/messages", {"text": text})

    def questions(self, team: str) -> list[dict[str, Any]]:
        """The team's approval questions so far, oldest first."""
        return [
            m
            for m in self.admin.messages(self.id)
            if m["sender"]["id"] == team and m["metadata"].get("ranch.approval")
        ]

    def said(self, sender: str) -> list[str]:
        return [m["text"] for m in self.admin.messages(self.id) if m["sender"]["id"] == sender]

    def refusal(self, team: str, words: str) -> dict[str, Any]:
        """Wait for the team's question that refuses an answer, saying `words`."""
        return dict(
            wait_until(
                lambda: next((q for q in self.questions(team) if words in q["text"]), None),
                timeout=20,
                what=f"{team} refusing: {words}",
            )
        )

    def paid(self, amount: str) -> str:
        return str(
            wait_until(
                lambda: next((t for t in self.said("finance") if f"pay {amount}" in t), None),
                timeout=20,
                what=f"finance paying {amount}",
            )
        )


def test_only_a_person_to_whom_the_member_is_open_answers_in_a_room(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        room = Room(hub.url)
        room.post(room.alice, "@office pay 100 to acme")
        (question,) = wait_until(lambda: room.questions("office"), timeout=20, what="the approval question")
        room.post(room.bot, "@office approve")  # an external agent
        refused = room.refusal("office", "agent 'bot' of 'default' may not answer")
        assert "only a person may approve" in refused["text"]
        assert (
            "It waits for the person who asked 'alice' or a person with the role owner or admin"
            in (refused["text"])
        )
        assert refused["text"].splitlines()[1].startswith("Approve sending this to finance?")

        room.post(room.bob, "@echo @office approve")  # echo relays "@office approve": an agent's message
        room.refusal("office", "agent 'echo' of 'default' may not answer this question: only a person")

        room.post(room.bob, "@office approve")  # a person, but finance is closed to him
        room.refusal("office", "person 'bob' of 'default' may not answer this question: finance is not open")
        assert room.said("finance") == []  # nobody above approved: finance never ran

        room.post(room.alice, "@office approve")  # the person who asked
        assert room.paid("100").startswith("PAID: sending to finance: pay 100 to acme")
        wait_until(lambda: room.admin.execution_status(room.id, "office") == "ready", what="office ready")
        approval = question["metadata"]["ranch.approval"]  # the page shows who may answer
        assert approval["member"] == "finance"
        assert approval["approvers"] == {"roles": ["owner", "admin"], "users": ["alice"]}


def test_a_teams_approvers_name_who_answers(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        room = Room(hub.url)
        room.post(room.alice, "@vault pay 7")
        wait_until(lambda: room.questions("vault"), timeout=20, what="vault's question")
        room.post(room.alice, "@vault approve")  # who asked, an admin: not the named approver
        room.refusal("vault", "they are not one of its approvers. It waits for user 'bob'.")
        room.post(room.bob, "@vault approve")
        room.paid("7")

        room.post(room.alice, "@safe pay 8")
        wait_until(lambda: room.questions("safe"), timeout=20, what="safe's question")
        room.post(room.alice, "@safe approve")  # an admin, not an owner
        room.refusal("safe", "It waits for a person with the role owner.")
        room.post(room.admin, "@safe approve")  # the organization's (and the room's) owner
        room.paid("8")


def test_over_a2a_the_person_who_asked_still_approves(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        room = Room(hub.url)
        alice_key = room.alice.headers["X-API-Key"]
        bot_key = room.bot.headers["X-API-Key"]

        async def scenario() -> None:
            async with sdk_client(hub.agent_url("office"), headers={"X-API-Key": alice_key}) as alice:
                asked = await ask(alice, "pay 5")
                assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
                done = await ask(alice, "approve", task_id=asked.id, context_id=asked.context_id)
                assert done.status.state == TaskState.TASK_STATE_COMPLETED
                assert said(done) == "PAID: sending to finance: pay 5"
            async with sdk_client(hub.agent_url("vault"), headers={"X-API-Key": bot_key}) as bot:
                asked = await ask(bot, "pay 6")  # an agent's own turn: it may not approve its hop
                answered = await ask(bot, "approve", task_id=asked.id, context_id=asked.context_id)
                assert answered.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
                assert said(answered).startswith("[ranch] agent 'bot' of 'default' may not answer")

        anyio.run(scenario)


def test_an_organizations_team_names_its_approval_members_by_their_short_names(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url, auth="keys") as hub:
        owner = Api(
            hub.url, Api(hub.url, ADMIN_KEY).post("/organizations", {"id": "acme"})["owner"]["api_key"]
        )
        owner.post(
            "/agents", {"id": "desk", "kind": "rules", "rules": [{"reply": "to finance", "route": "finance"}]}
        )
        owner.post(
            "/agents", {"id": "finance", "kind": "rules", "rules": [{"reply": "PAID", "route": "user"}]}
        )
        team = {"kind": "team", "members": ["desk", "finance"], "default_agent": "desk"}
        owner.post("/agents", {**team, "id": "office", "approval": ["finance"]})
        owner.post("/agents", {**team, "id": "vault", "access": {"finance": {"allow": ["role:admin"]}}})

        async def scenario() -> None:
            headers = {"X-API-Key": owner.headers["X-API-Key"]}
            async with sdk_client(hub.agent_url("acme.office"), headers=headers) as client:
                asked = await ask(client, "pay 9")
                assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, said(asked)
                done = await ask(client, "approve", task_id=asked.id, context_id=asked.context_id)
                assert said(done) == "PAID"
            async with sdk_client(hub.agent_url("acme.vault"), headers=headers) as client:
                closed = await ask(client, "pay 10")  # finance is open to admins; acme's owner is none
                assert "[ranch] acme.finance is not open to person 'acme.owner'" in said(closed)

        anyio.run(scenario)


def test_a_bad_approval_is_named_in_the_config() -> None:
    from ranch.config import parse_config
    from ranch.exceptions import ConfigError

    base = "agents:\n  - {id: a, kind: echo}\n  - {id: b, kind: echo}\n"
    team = "teams:\n  - {id: t, members: [a, b], default_agent: a, approval: %s}\n"
    assert parse_config(base + team % "[b]").teams[0].approval.members == ["b"]  # the short form
    for given, named in [
        ("b", "t: approval: Value error, give a list of members"),
        ("{members: [c]}", "t: approval names 'c', which is not a member"),
        (
            "{members: [b], approvers: {}}",
            "t: approval.approvers: Value error, name at least one of roles or users",
        ),
        ("{members: [b], approvers: {roles: [boss]}}", "t: approval.approvers.roles.0"),
    ]:
        try:
            parse_config(base + team % given)
        except ConfigError as refused:
            assert named in str(refused), str(refused)
        else:
            raise AssertionError(f"approval: {given} was accepted")
