"""Rooms end to end through REST and the WebSocket, on SQLite and on PostgreSQL.

A room holds two people, a local rules agent, a remote agent served by the official
a2a-sdk (registered by URL), and a team; mentions wake them, the team's routing shows
as events, and every watcher sees the events in order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from a2a.types import GetTaskRequest, TaskState
from google.protobuf.json_format import MessageToDict

from _support import probes
from _support.hubkit import ADMIN_KEY, Api, Live, serve_ranch, wait_until
from _support.peers import RunningPeer, running_peer
from _support.sdk import sdk_client, send, user_message

AGENTS = """
agents:
  - id: triage
    kind: rules
    rules:
      - {match: "^Notes", reply: "Here you go: {text}", route: user, reason: research done}
      - {match: "(?i)papers", reply: "Routing to the researcher.", route: researcher, reason: needs research}
      - {reply: "Triage heard: {text}"}
  - id: researcher
    kind: rules
    rules:
      - {reply: "Notes: three papers", route: sender, reason: found them}
  - id: greeter
    kind: rules
    rules: [{reply: "Hello from greeter: {text}"}]
"""
TEAMS = """
teams:
  - {id: desk, name: Desk, members: [triage, researcher], default_agent: triage}
"""
CONFIG = AGENTS + TEAMS


@pytest.fixture
def peer() -> Iterator[RunningPeer]:
    with running_peer("plain", name="Remote peer") as running:
        yield running


def make_room(admin: Api, peer_url: str) -> tuple[str, Api]:
    """Bob (a second person), greeter, the remote peer (history_length 2) and the desk team."""
    bob = admin.post("/users", {"id": "bob", "name": "Bob"})
    registered = admin.post("/agents", {"id": "peer", "kind": "remote", "url": peer_url, "history_length": 2})
    assert registered["agent"]["name"] == "Remote peer"  # read from the fetched card
    room = admin.post(
        "/rooms",
        {
            "title": "Ops",
            "participants": [
                {"kind": "user", "id": "bob"},
                {"kind": "agent", "id": "greeter"},
                {"kind": "agent", "id": "peer"},
                {"kind": "team", "id": "desk"},
            ],
            "default_agent": "desk",
        },
    )
    return room["id"], Api(admin.base_url, bob["api_key"])


def reply_from(agent: str, starts: str) -> Any:
    return lambda f: (
        f["type"] == "message.created"
        and f["data"]["sender"]["id"] == agent
        and f["data"]["text"].startswith(starts)
    )


def test_people_agents_and_a_team_share_a_room(database_url: str, peer: RunningPeer) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room, bob = make_room(admin, peer.url)
        live = Live(hub.url, ADMIN_KEY)
        live.subscribe([room])

        admin.post(f"/rooms/{room}/messages", {"text": "@desk find papers on routing"})
        frames = live.until(lambda f: f["type"] == "routing.decided" and f["data"]["recipient"] == "user")
        cursors = [f["cursor"] for f in frames if f["cursor"] is not None]
        assert cursors == sorted(cursors) and len(set(cursors)) == len(cursors)
        decided = [f["data"] for f in frames if f["type"] == "routing.decided"]
        assert [(d["agent"], d["recipient"], d["reason"]) for d in decided] == [
            ("triage", "researcher", "needs research"),
            ("researcher", "triage", "found them"),
            ("triage", "user", "research done"),
        ]
        assert all(d["team"] == "desk" and d["ms"] >= 0 for d in decided)
        spoken = [(m["sender"]["id"], m["text"]) for m in admin.messages(room)]
        assert spoken == [
            ("admin", "@desk find papers on routing"),
            ("triage", "Routing to the researcher."),
            ("researcher", "Notes: three papers"),
            ("triage", "Here you go: Notes: three papers"),
        ]
        # the team's execution is told "ready" just after its last message is written
        wait_until(
            lambda: (
                {agent: row["status"] for agent, row in admin.executions(room).items()}
                == {"desk": "ready", "triage": "ready", "researcher": "ready"}
            ),
            timeout=10,
            what="every execution of the turn ready",
        )

        bob.post(f"/rooms/{room}/messages", {"text": "@greeter hi there"})
        live.until(reply_from("greeter", "Hello from greeter: hi there"))
        bob.post(f"/rooms/{room}/messages", {"text": "@peer how are you"})
        live.until(reply_from("peer", "plain saw:"))

        # history_length 2: the remote agent was shown exactly the two messages before its own
        received = peer.recorder.wait_for_messages(1)[-1].text
        assert "bob: @greeter hi there" in received
        assert "greeter: Hello from greeter: hi there" in received
        assert "find papers" not in received and "Notes: three papers" not in received

        bob.post(f"/rooms/{room}/messages", {"text": "anyone around?"})  # no mention: the default team
        live.until(reply_from("triage", "Triage heard: anyone around?"))
        live.close()


def test_an_execution_is_an_a2a_task_and_the_gateway_posts_into_rooms(
    database_url: str, peer: RunningPeer
) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room, _bob = make_room(admin, peer.url)
        admin.post(f"/rooms/{room}/messages", {"text": "@greeter one"})
        wait_until(lambda: len(admin.messages(room)) == 2, what="the first greeter reply")
        admin.post(f"/rooms/{room}/messages", {"text": "@greeter two"})
        wait_until(lambda: len(admin.messages(room)) == 4, what="the second greeter reply")
        execution = admin.executions(room)["greeter"]
        assert execution["status"] == "ready" and execution["turns"] == 2

        task = admin.get(f"/executions/{execution['id']}/task")
        assert task["id"] == execution["id"] and task["contextId"] == room
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert task["metadata"]["ranch.execution"]["status"] == "ready"
        assert [m["parts"][0]["text"] for m in task["history"]] == [
            "@greeter one",
            "Hello from greeter: one",
            "@greeter two",
            "Hello from greeter: two",
        ]
        assert task["artifacts"][0]["parts"][0]["text"] == "Hello from greeter: two"
        trimmed = admin.get(f"/executions/{execution['id']}/task", history_length=1)
        assert [m["parts"][0]["text"] for m in trimmed["history"]] == ["Hello from greeter: two"]

        async def over_a2a() -> None:
            async with sdk_client(hub.agent_url("greeter")) as client:
                (response,) = await send(client, user_message("three, over A2A", context_id=room))
                assert response.task.id == execution["id"]
                assert response.task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
                assert MessageToDict(response.task.metadata)["ranch.execution"]["status"] == "ready"
                assert response.task.artifacts[0].parts[0].text == "Hello from greeter: three, over A2A"
                fetched = await client.get_task(GetTaskRequest(id=execution["id"]))
                assert fetched.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

        import anyio

        anyio.run(over_a2a)
        texts = [m["text"] for m in admin.messages(room)]
        assert texts[-2:] == ["three, over A2A", "Hello from greeter: three, over A2A"]

        canceled = admin.post(f"/executions/{execution['id']}/cancel", None, status=200)
        assert canceled["status"] == "canceled"
        again = admin.call("POST", f"/executions/{execution['id']}/cancel")
        assert again.status_code == 409 and again.json()["error"]["code"] == "CONFLICT"
        admin.post(f"/rooms/{room}/messages", {"text": "@greeter four"})
        wait_until(lambda: admin.execution_status(room, "greeter") == "ready", what="a new execution")
        assert admin.executions(room)["greeter"]["id"] != execution["id"]

        archived = admin.call("PATCH", f"/rooms/{room}", {"status": "archived"})
        assert archived.status_code == 200
        assert {row["status"] for row in admin.executions(room).values()} == {"completed"}
        closed = admin.call("POST", f"/rooms/{room}/messages", {"text": "@greeter five"})
        assert closed.status_code == 409 and closed.json()["error"]["field"] == "room_id"


def test_tenants_never_see_each_other(database_url: str, peer: RunningPeer) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room, _bob = make_room(admin, peer.url)
        admin.post(f"/rooms/{room}/messages", {"text": "@greeter secret plans"})
        wait_until(lambda: len(admin.messages(room)) == 2, what="the greeter's reply")
        execution = admin.executions(room)["greeter"]["id"]

        acme = admin.post("/organizations", {"id": "acme", "name": "Acme"})
        other = Api(hub.url, acme["owner"]["api_key"])
        assert other.get("/me")["org"]["id"] == "acme"
        for method, path, body in [
            ("GET", f"/rooms/{room}", None),
            ("GET", f"/rooms/{room}/messages", None),
            ("GET", f"/rooms/{room}/events", None),
            ("GET", f"/rooms/{room}/participants", None),
            ("POST", f"/rooms/{room}/messages", {"text": "hello?"}),
            ("PATCH", f"/rooms/{room}", {"title": "mine"}),
            ("GET", f"/executions/{execution}", None),
            ("GET", f"/executions/{execution}/task", None),
            ("POST", f"/executions/{execution}/cancel", None),
            ("GET", "/agents/peer", None),
        ]:
            response = other.call(method, path, body)
            assert response.status_code == 404, (method, path, response.text)
            assert response.json()["error"]["code"] == "NOT_FOUND"
        assert other.get("/rooms")["items"] == []
        assert "peer" not in {a["id"] for a in other.get("/agents")["items"]}  # org-private
        assert "greeter" in {a["id"] for a in other.get("/agents")["items"]}  # config agents are global
        # what an organization's admin may not make the server do: start processes, read its
        # environment, call into its network
        refusals: list[tuple[dict[str, Any], int, str]] = [
            (
                {"mcp_servers": [{"name": "x", "command": "sh", "args": ["-c", "id"]}]},
                400,
                "mcp_servers[0].command",
            ),
            ({"api_key_env": "RANCH_ADMIN_KEY"}, 400, "api_key_env"),
            ({"base_url": "http://127.0.0.1:9/v1"}, 422, "base_url"),
            ({"remote_agents": ["http://169.254.169.254/latest"]}, 422, "remote_agents[0]"),
        ]
        for body, status, field in refusals:
            refused = other.call("POST", "/agents", {"id": "sneaky", "kind": "llm", "model": "m", **body})
            assert refused.status_code == status, refused.text
            assert refused.json()["error"]["field"] == field
        keyed = other.call(
            "POST",
            "/agents",
            {
                "id": "keyed",
                "kind": "remote",
                "url": peer.url,
                "verify_card": True,
                "trusted_keys": ["/etc/passwd"],
            },
        )
        assert keyed.status_code == 400 and keyed.json()["error"]["field"] == "trusted_keys"
        inward = other.call("POST", "/agents", {"id": "inward", "kind": "remote", "url": peer.url})
        assert inward.status_code == 422 and "loopback" in inward.json()["error"]["message"]
        live = Live(hub.url, acme["owner"]["api_key"])
        live.send({"type": "subscribe", "rooms": [room], "cursor": 0})
        frame = live.recv()
        assert frame["type"] == "error" and frame["error"]["code"] == "NOT_FOUND"
        live.close()


def test_canceling_an_execution_stops_its_agent(tmp_path: Any) -> None:
    slow = """
  - id: slow
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 30, reply: "too late"}
"""
    with serve_ranch(AGENTS + slow + TEAMS, f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = admin.post("/rooms", {"title": "Patience", "participants": [{"kind": "agent", "id": "slow"}]})[
            "id"
        ]
        admin.post(f"/rooms/{room}/messages", {"text": "@slow take your time"})
        execution = wait_until(
            lambda: (
                admin.executions(room).get("slow", {}).get("status") == "working"
                and admin.executions(room)["slow"]
            ),
            what="slow working",
        )
        # the execution says working as its run starts, a moment before the agent's own code runs
        wait_until(lambda: probes.BUSY["slow"] == 1, what="the agent running")
        canceled = admin.post(f"/executions/{execution['id']}/cancel", None, status=200)
        assert canceled["status"] == "canceled"
        wait_until(lambda: probes.BUSY["slow"] == 0, timeout=5, what="the agent stopped")
        assert [m["text"] for m in admin.messages(room)] == ["@slow take your time"]  # no reply posted
        assert admin.executions(room)["slow"]["status"] == "canceled"


def test_a_watcher_that_reconnects_with_its_cursor_misses_nothing(
    database_url: str, peer: RunningPeer
) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room, bob = make_room(admin, peer.url)
        live = Live(hub.url, ADMIN_KEY)
        live.subscribe([room])
        bob.post(f"/rooms/{room}/messages", {"text": "@greeter first"})
        seen = live.until(reply_from("greeter", "Hello from greeter: first"))
        last = max(f["cursor"] for f in seen if f["cursor"] is not None)
        live.close()

        bob.post(f"/rooms/{room}/messages", {"text": "@greeter second"})
        bob.post(f"/rooms/{room}/messages", {"text": "@greeter third"})
        wait_until(lambda: len(admin.messages(room)) == 6, what="the replies while disconnected")
        missed = admin.get(f"/rooms/{room}/events", since=last, limit=200)["items"]
        assert missed and all(event["cursor"] > last for event in missed)

        again = Live(hub.url, ADMIN_KEY)
        subscribed = again.subscribe([room], cursor=last)
        assert subscribed["replayed"] == len(missed)
        replayed = [again.recv() for _ in missed]
        assert [f["cursor"] for f in replayed] == [e["cursor"] for e in missed]
        assert [f["type"] for f in replayed] == [e["type"] for e in missed]
        bob.post(f"/rooms/{room}/messages", {"text": "@greeter live again"})
        after = again.until(reply_from("greeter", "Hello from greeter: live again"))
        assert all(f["cursor"] > replayed[-1]["cursor"] for f in after if f["cursor"] is not None)
        again.close()


def test_an_external_agent_reads_acknowledges_and_answers(database_url: str, peer: RunningPeer) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room, _bob = make_room(admin, peer.url)
        scout = admin.post(
            "/agents", {"id": "scout", "kind": "external", "description": "brings its own model"}
        )
        assert scout["agent"]["is_external"] and scout["agent"]["a2a_url"] is None
        admin.post(f"/rooms/{room}/participants", {"kind": "agent", "id": "scout"})
        agent = Api(hub.url, scout["api_key"])
        assert agent.call("GET", "/agent/messages/next").status_code == 204
        admin.post(f"/rooms/{room}/messages", {"text": "@scout look into the outage"})
        delivery = agent.get("/agent/messages/next")
        assert delivery["room_id"] == room and delivery["message"]["text"] == "@scout look into the outage"
        assert admin.executions(room)["scout"]["status"] == "working"
        database = hub.database_url

    with serve_ranch(CONFIG, database) as hub:  # a restart: the unacknowledged delivery comes again
        admin = Api(hub.url, ADMIN_KEY)
        agent = Api(hub.url, scout["api_key"])
        assert agent.get("/agent/messages/next")["delivery_id"] == delivery["delivery_id"]
        assert admin.executions(room)["scout"]["status"] == "working"  # still waiting on the agent
        live = Live(hub.url, scout["api_key"])
        pushed = live.recv()
        assert pushed["type"] == "delivery" and pushed["delivery_id"] == delivery["delivery_id"]
        live.send({"type": "ack", "delivery_id": delivery["delivery_id"]})
        assert live.recv() == {"type": "acked", "delivery_id": delivery["delivery_id"]}
        assert agent.call("GET", "/agent/messages/next").status_code == 204

        admin.post(f"/rooms/{room}/messages", {"text": "@scout and the database?"})
        pushed = live.until(lambda f: f["type"] == "delivery")[-1]
        assert pushed["message"]["text"] == "@scout and the database?"
        agent.post(f"/rooms/{room}/messages", {"text": "Both fixed."})
        assert admin.messages(room)[-1]["sender"] == {"kind": "agent", "id": "scout"}
        execution = admin.executions(room)["scout"]
        assert execution["status"] == "ready" and execution["turns"] == 1
        live.close()


def test_bad_requests_get_clear_errors_naming_the_field(database_url: str, peer: RunningPeer) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room, bob = make_room(admin, peer.url)
        anonymous = Api(hub.url, "")

        def error(response: Any, status: int, code: str, field: str | None) -> None:
            assert response.status_code == status, response.text
            assert response.json()["error"]["code"] == code
            assert response.json()["error"]["field"] == field
            assert response.json()["error"]["message"]

        error(anonymous.call("GET", "/rooms"), 401, "UNAUTHENTICATED", None)
        error(Api(hub.url, "rk_wrong").call("GET", "/rooms"), 401, "UNAUTHENTICATED", None)
        error(admin.call("POST", f"/rooms/{room}/messages", {"text": 5}), 400, "INVALID_PARAMS", "text")
        error(admin.call("POST", f"/rooms/{room}/messages", {"text": "  "}), 400, "INVALID_PARAMS", "text")
        error(
            admin.call("POST", f"/rooms/{room}/messages", {"text": "x", "type": "task"}),
            400,
            "INVALID_PARAMS",
            "type",
        )
        too_big = {"text": "x" * 100_001}
        error(admin.call("POST", f"/rooms/{room}/messages", too_big), 413, "PAYLOAD_TOO_LARGE", "text")
        bell = {"text": "ring \u0007"}
        error(admin.call("POST", f"/rooms/{room}/messages", bell), 400, "INVALID_PARAMS", "text")
        error(admin.call("GET", "/no/such/route"), 404, "NOT_FOUND", None)
        raw = admin.raw("POST", f"/rooms/{room}/messages", b"{not json")
        error(raw, 400, "INVALID_PARAMS", "body")
        error(admin.call("GET", "/rooms/nope"), 404, "NOT_FOUND", "room_id")
        error(admin.call("GET", f"/rooms/{room}/messages", limit=0), 400, "INVALID_PARAMS", "limit")
        error(bob.call("POST", "/users", {"name": "Eve"}), 403, "PERMISSION_DENIED", None)
        error(
            admin.call("POST", "/rooms", {"title": "x", "participants": [{"kind": "agent", "id": "ghost"}]}),
            404,
            "NOT_FOUND",
            "participants[0].id",
        )
        error(admin.call("POST", "/agents", {"id": "Bad Id", "kind": "echo"}), 400, "INVALID_PARAMS", "id")
        error(admin.call("POST", "/agents", {"id": "pyx", "kind": "python"}), 400, "INVALID_PARAMS", "kind")
        error(admin.call("POST", "/agents", {"id": "greeter", "kind": "echo"}), 409, "CONFLICT", "id")
        error(
            admin.call("POST", "/agents", {"id": "r1", "kind": "rules", "rules": []}),
            400,
            "INVALID_PARAMS",
            "rules",
        )
        unreachable = admin.call(
            "POST", "/agents", {"id": "gone", "kind": "remote", "url": "http://127.0.0.1:9/"}
        )
        error(unreachable, 422, "UNPROCESSABLE", "url")
        admin.call("PATCH", "/organizations/current", {"allowed_agent_urls": ["http://127.0.0.1:1/"]})
        refused = admin.call("POST", "/agents", {"id": "far", "kind": "remote", "url": peer.url})
        error(refused, 422, "UNPROCESSABLE", "url")
        assert "allow-list" in refused.json()["error"]["message"]


def test_agents_work_concurrently_across_rooms_and_in_order_within_one(tmp_path: Any) -> None:
    pondering = """
  - id: pondering
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 0.4, reply: "thought about: {text}"}
"""
    config = AGENTS + pondering + TEAMS
    with serve_ranch(config, f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        rooms = [
            admin.post("/rooms", {"title": name, "participants": [{"kind": "agent", "id": "pondering"}]})[
                "id"
            ]
            for name in ("north", "south")
        ]
        for text in ("one", "two", "three"):
            for room in rooms:
                admin.post(f"/rooms/{room}/messages", {"text": f"@pondering {text}"})
        for room in rooms:

            def answered(room: str = room) -> bool:
                return len(admin.messages(room)) == 6

            wait_until(answered, what=f"three replies in {room}")
            replies = [m["text"] for m in admin.messages(room) if m["sender"]["id"] == "pondering"]
            assert replies == ["thought about: one", "thought about: two", "thought about: three"]
            assert probes.PEAK[f"pondering/{room}"] == 1  # one message at a time within a room
        assert probes.PEAK["pondering"] == 2  # the two rooms were served at the same time
