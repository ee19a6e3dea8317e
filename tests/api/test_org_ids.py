"""Ids an organization chooses are its own: two organizations may choose the same names.

Organization `acme` naming a room, user or agent `ops` gets `acme.ops`; the default organization's
ids have no prefix, and ids the server generates (UUIDs) have none either. A 409 only ever
concerns the caller's own organization, so no answer tells one organization what another has.
An organization may name its own agents and users by their short names (its own first).
"""

from __future__ import annotations

from typing import Any

from _support.hubkit import ADMIN_KEY, Api, serve_ranch, wait_until

CONFIG = """
agents:
  - {id: greeter, kind: echo}
"""
NAMES = ("ops", "sam", "helper")


def _organization(admin: Api, org: str) -> Api:
    return Api(admin.base_url, admin.post("/organizations", {"id": org})["owner"]["api_key"])


def _choose(api: Api) -> tuple[str, str, str]:
    """A user, an agent and a room, all named by the caller; their ids."""
    user = api.post("/users", {"id": "sam", "name": "Sam"})["user"]["id"]
    agent = api.post("/agents", {"id": "helper", "kind": "echo"})["agent"]["id"]
    members = [{"kind": "user", "id": "sam"}, {"kind": "agent", "id": "helper"}]  # short names
    room = api.post(
        "/rooms", {"id": "ops", "title": "Ops", "participants": members, "default_agent": "helper"}
    )
    return room["id"], user, agent


def test_two_organizations_choose_the_same_names_and_neither_learns_of_the_other(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        acme, beta = _organization(admin, "acme"), _organization(admin, "beta")
        assert _choose(acme) == ("acme.ops", "acme.sam", "acme.helper")
        assert _choose(beta) == ("beta.ops", "beta.sam", "beta.helper")

        for mine, org, other in ((acme, "acme", "beta"), (beta, "beta", "acme")):
            for path in (f"/rooms/{other}.ops", f"/agents/{other}.helper", f"/rooms/{other}.ops/messages"):
                answer = mine.call("GET", path)
                assert answer.status_code == 404 and answer.json()["error"]["code"] == "NOT_FOUND", (
                    answer.text
                )
            assert [room["id"] for room in mine.get("/rooms")["items"]] == [f"{org}.ops"]
            assert {user["id"] for user in mine.get("/users")["items"]} == {f"{org}.owner", f"{org}.sam"}
            assert f"{other}.helper" not in {agent["id"] for agent in mine.get("/agents")["items"]}
            foreign = mine.call("POST", "/keys", {"owner": {"kind": "user", "id": f"{other}.sam"}})
            assert foreign.status_code == 404 and foreign.json()["error"]["field"] == "owner.id"
            # choosing a name again is a conflict within the organization, about its own id only
            for path, body in (
                ("/rooms", {"id": "ops", "title": "again"}),
                ("/users", {"id": "sam", "name": "Sam again"}),
                ("/agents", {"id": "helper", "kind": "echo"}),
            ):
                again = mine.call("POST", path, body)
                assert again.status_code == 409 and again.json()["error"]["field"] == "id", again.text
                assert f"'{org}." in again.json()["error"]["message"] and other not in again.text


def test_the_default_organization_and_generated_ids_have_no_prefix_and_no_one_chooses_a_dot(
    database_url: str,
) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        acme = _organization(admin, "acme")
        assert _choose(acme) == ("acme.ops", "acme.sam", "acme.helper")
        assert _choose(admin) == ("ops", "sam", "helper")  # the default organization: as chosen
        generated = [
            acme.post("/rooms", {"title": "x"})["id"],
            acme.post("/users", {"name": "X"})["user"]["id"],
        ]
        assert all("." not in value and len(value) == 36 for value in generated)  # UUIDs, bare
        for path, body in (
            ("/rooms", {"id": "beta.ops", "title": "x"}),
            ("/users", {"id": "beta.sam", "name": "x"}),
            ("/agents", {"id": "beta.helper", "kind": "echo"}),
        ):
            refused = acme.call("POST", path, body)
            assert refused.status_code == 400 and refused.json()["error"]["field"] == "id", refused.text
        long = acme.call("POST", "/rooms", {"id": "r" * 60, "title": "x"})  # 65 with "acme."
        assert long.status_code == 400 and long.json()["error"]["field"] == "id", long.text


def test_an_organization_names_its_own_by_their_short_names(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        acme = _organization(admin, "acme")
        room, _, helper = _choose(acme)
        team = acme.post(
            "/agents",
            {"id": "crew", "kind": "team", "members": ["helper", "greeter"], "default_agent": "helper"},
        )
        assert team["agent"]["id"] == "acme.crew"
        assert team["agent"]["members"] == ["acme.helper", "greeter"]  # its own first, then the global one
        added = acme.post(f"/rooms/{room}/participants", {"kind": "team", "id": "crew"})
        assert added["id"] == "acme.crew" and added["kind"] == "team"
        key = acme.post("/keys", {"owner": {"kind": "user", "id": "sam"}})
        assert key["key"]["owner"] == {"kind": "user", "id": "acme.sam"}

        sent = acme.post(f"/rooms/{room}/messages", {"text": "@helper ping"})
        assert sent["mentions"] == [helper]

        def answered() -> Any:
            return [m for m in acme.messages(room) if m["sender"]["id"] == helper]

        assert wait_until(answered, what="the organization's helper to answer")
        acme.call("DELETE", f"/rooms/{room}/participants/team/crew")
        assert "acme.crew" not in {p["id"] for p in acme.get(f"/rooms/{room}/participants")["items"]}
