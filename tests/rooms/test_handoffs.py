"""Handoffs in rooms: an agent hands its work to another agent of the room and waits for it.

The agent handing over (through the client-routing extension's `handoff` field, or a REST call
for an external agent) gets a child execution of the other agent linked to its own, and its own
execution waits as `handoff`; when the child ends (completed, failed or canceled) the parent's
agent is woken with the child's result and carries on. Chains unwind in order, loops are refused,
cancelling a parent cancels its children. Checked over REST and the WebSocket, on a real server.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from a2a.types import CancelTaskRequest, GetTaskRequest, TaskState
from google.protobuf.json_format import MessageToDict

from _support import handoffs, probes
from _support.handoffs import handing_peer
from _support.hubkit import ADMIN_KEY, Api, Live, events_of, serve_ranch, wait_until
from _support.sdk import sdk_client, send, user_message
from ranch.agents.base import text_of

CONFIG = """
agents:
  - id: lead
    kind: python
    entry: _support.handoffs:Handing
    options: {to: helper, reason: "needs a specialist", done: true}
  - id: helper
    kind: python
    entry: _support.probes:Probe
    options: {reply: "helper's answer to: {text}"}
  - id: middle
    kind: python
    entry: _support.handoffs:Handing
    options: {to: last, reason: "one more step"}
  - id: last
    kind: python
    entry: _support.probes:Probe
    options: {reply: "last says: {text}"}
  - id: first
    kind: python
    entry: _support.handoffs:Handing
    options: {to: middle, reason: "start the chain", done: true}
  - id: bouncer
    kind: python
    entry: _support.handoffs:Handing
    options: {to: looper, reason: "over to you", done: true}
  - id: looper
    kind: python
    entry: _support.handoffs:Handing
    options: {to: bouncer, reason: "back to you"}
  - id: breaker
    kind: python
    entry: _support.probes:Probe
    options: {fail: "the specialist broke"}
  - id: napper
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 30, reply: "too late"}
  - id: to_breaker
    kind: python
    entry: _support.handoffs:Handing
    options: {to: breaker, reason: "risky", done: true}
  - id: to_napper
    kind: python
    entry: _support.handoffs:Handing
    options: {to: napper, reason: "slow work", done: true}
  - id: to_scout
    kind: python
    entry: _support.handoffs:Handing
    options: {to: scout, done: true, answers: [scout]}
  - id: asker
    kind: python
    entry: _support.handoffs:Handing
    options: {to: napper, reason: "slow work"}
"""


@pytest.fixture(autouse=True)
def _fresh_seen() -> None:
    handoffs.SEEN.clear()


def room_with(admin: Api, *agents: str) -> str:
    participants = [{"kind": "agent", "id": agent} for agent in agents]
    room: dict[str, Any] = admin.post("/rooms", {"title": "Handoffs", "participants": participants})
    return str(room["id"])


def by_agent(admin: Api, room: str) -> dict[str, list[dict[str, Any]]]:
    """Each agent's executions in the room, oldest first."""
    found: dict[str, list[dict[str, Any]]] = {}
    for row in reversed(admin.get(f"/rooms/{room}/executions")["items"]):
        found.setdefault(row["agent_id"], []).append(row)
    return found


def ended(admin: Api, room: str, agent: str, status: str = "completed") -> dict[str, Any]:
    """`agent`'s newest execution once it has `status`."""

    def check() -> dict[str, Any] | None:
        rows = by_agent(admin, room).get(agent, [])
        return rows[-1] if rows and rows[-1]["status"] == status else None

    found: dict[str, Any] = wait_until(check, timeout=15, what=f"{agent}'s execution {status}")
    return found


def statuses(events: list[dict[str, Any]], execution_id: str) -> list[str]:
    """The statuses an execution went through, as its `execution.updated` events say, repeats dropped."""
    seen: list[str] = []
    for event in events:
        if event["type"] == "execution.updated" and event["data"]["id"] == execution_id:
            if not seen or seen[-1] != event["data"]["status"]:
                seen.append(event["data"]["status"])
    return seen


def test_a_handoff_through_the_routing_extension_completes_the_parent(database_url: str) -> None:
    with serve_ranch(CONFIG, database_url) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "lead", "helper")
        live = Live(hub.url, ADMIN_KEY)
        live.subscribe([room])
        admin.post(f"/rooms/{room}/messages", {"text": "@lead plan the trip"})

        def parent_completed(frame: dict[str, Any]) -> bool:
            data = frame["data"]
            return bool(
                frame["type"] == "execution.updated"
                and data["agent_id"] == "lead"
                and data["status"] == "completed"
            )

        frames = live.until(parent_completed)
        live.close()
        parent = ended(admin, room, "lead")
        child = ended(admin, room, "helper")
        assert child["parent_execution_id"] == parent["id"] and parent["parent_execution_id"] is None
        assert parent["handoff_to"] is None  # it waits on nothing any more

        # over the WebSocket: the parent worked, waited on its child, was woken and completed
        assert statuses(frames, parent["id"]) == ["submitted", "working", "handoff", "working", "completed"]
        waiting = next(
            f["data"] for f in frames if f["type"] == "execution.updated" and f["data"]["status"] == "handoff"
        )
        assert (
            waiting["handoff_to"] == child["id"]
            and waiting["reason"] == "handed off to helper: needs a specialist"
        )
        assert statuses(frames, child["id"]) == ["submitted", "working", "completed"]
        # and the REST event log says the same, in the same order
        assert statuses(events_of(admin, room), parent["id"]) == statuses(frames, parent["id"])

        # the helper was asked with the lead's words, and the lead was woken with the helper's answer
        spoken = [(m["sender"]["id"], m["text"]) for m in admin.messages(room)]
        assert spoken == [
            ("admin", "@lead plan the trip"),
            ("lead", "handing over to helper"),
            ("helper", "helper's answer to: handing over to helper"),
            ("lead", "lead got: helper's answer to: handing over to helper"),
        ]
        handing = admin.messages(room)[1]
        assert handing["mentions"] == ["helper"]
        assert handing["metadata"]["ranch.handoff"] == {
            "parent": parent["id"],
            "child": child["id"],
            "agent": "helper",
            "reason": "needs a specialist",
        }
        assert [text_of(m).split("\n")[-1] for m in handoffs.SEEN["lead"]][-1] == (
            "helper's answer to: handing over to helper"
        )

        # GET one execution: its parent and its children
        detail = admin.get(f"/executions/{parent['id']}")
        assert detail["parent"] is None and [c["id"] for c in detail["children"]] == [child["id"]]
        assert detail["children"][0]["status"] == "completed"
        detail = admin.get(f"/executions/{child['id']}")
        assert detail["parent"]["id"] == parent["id"] and detail["children"] == []


def test_a_chain_of_three_unwinds_in_order(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "first", "middle", "last")
        admin.post(f"/rooms/{room}/messages", {"text": "@first start"})
        top = ended(admin, room, "first")
        middle, last = ended(admin, room, "middle"), ended(admin, room, "last")
        assert (middle["parent_execution_id"], last["parent_execution_id"]) == (top["id"], middle["id"])
        events = events_of(admin, room)
        completions = [
            event["data"]["agent_id"]
            for event in events
            if event["type"] == "execution.updated" and event["data"]["status"] == "completed"
        ]
        assert completions == ["last", "middle", "first"]
        assert statuses(events, middle["id"]) == ["submitted", "working", "handoff", "working", "completed"]
        spoken = [(m["sender"]["id"], m["text"]) for m in admin.messages(room)]
        assert spoken == [
            ("admin", "@first start"),
            ("first", "handing over to middle"),
            ("middle", "handing over to last"),
            ("last", "last says: handing over to last"),
            ("middle", "middle got: last says: handing over to last"),
            ("first", "first got: middle got: last says: handing over to last"),
        ]


def test_a_loop_is_refused_and_the_work_still_comes_back(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "bouncer", "looper")
        admin.post(f"/rooms/{room}/messages", {"text": "@bouncer go"})
        parent = ended(admin, room, "bouncer")
        child = ended(admin, room, "looper")  # its handoff refused, its answer is its result
        assert child["parent_execution_id"] == parent["id"]
        assert len(by_agent(admin, room)["bouncer"]) == 1  # no execution of the waiting agent was opened
        errors = [m["text"] for m in admin.messages(room) if m["type"] == "error"]
        assert errors == [
            "[ranch] handoff refused: handoff loop (bouncer → looper → bouncer): 'bouncer' waits for "
            "this work, so it cannot take it over"
        ]
        assert child["reason"] == errors[0]
        assert admin.messages(room)[-1]["text"] == "bouncer got: handing over to bouncer"


def test_a_failed_child_wakes_its_parent_with_why(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "to_breaker", "breaker")
        admin.post(f"/rooms/{room}/messages", {"text": "@to_breaker try it"})
        parent = ended(admin, room, "to_breaker")
        child = ended(admin, room, "breaker", "failed")
        assert child["parent_execution_id"] == parent["id"] and "the specialist broke" in child["reason"]
        woken = [m for m in admin.messages(room) if m["metadata"].get("ranch.handoff", {}).get("status")]
        assert len(woken) == 1 and woken[0]["sender"] == {"kind": "system", "id": "ranch"}
        assert woken[0]["text"].startswith("[ranch] the handoff to breaker failed: ")
        assert woken[0]["mentions"] == ["to_breaker"]
        assert admin.messages(room)[-1]["text"].startswith(
            "to_breaker got: [ranch] the handoff to breaker failed"
        )


def test_cancelling_a_child_wakes_the_parent_and_cancelling_a_parent_cancels_its_child(
    tmp_path: Path,
) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "to_napper", "napper")
        admin.post(f"/rooms/{room}/messages", {"text": "@to_napper first job"})
        child = ended(admin, room, "napper", "working")
        parent = ended(admin, room, "to_napper", "handoff")
        assert parent["handoff_to"] == child["id"]
        canceled = admin.post(f"/executions/{child['id']}/cancel", None, status=200)
        assert canceled["status"] == "canceled"
        parent = ended(admin, room, "to_napper")  # woken with "canceled", it answered and was done
        assert admin.messages(room)[-1]["text"].startswith(
            "to_napper got: [ranch] the handoff to napper canceled"
        )

        second = room_with(admin, "to_napper", "napper")
        admin.post(f"/rooms/{second}/messages", {"text": "@to_napper second job"})
        child = ended(admin, second, "napper", "working")
        parent = ended(admin, second, "to_napper", "handoff")
        admin.post(f"/executions/{parent['id']}/cancel", None, status=200)
        child = ended(admin, second, "napper", "canceled")
        assert child["reason"] == f"its parent execution {parent['id']} ended"
        assert ended(admin, second, "to_napper", "canceled")["handoff_to"] is None
        assert not any(m["metadata"].get("ranch.handoff", {}).get("status") for m in admin.messages(second))


def test_an_external_agent_hands_off_over_rest(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        scout = admin.post(
            "/agents", {"id": "scout", "kind": "external", "description": "brings its own model"}
        )
        agent = Api(hub.url, scout["api_key"])
        room = room_with(admin, "scout", "helper", "napper")
        admin.post(f"/rooms/{room}/messages", {"text": "@scout look into the outage"})
        delivery = agent.get("/agent/messages/next")
        execution = ended(admin, room, "scout", "working")
        path = f"/executions/{execution['id']}/handoff"

        def refused(body: dict[str, Any], status: int, words: str) -> None:
            response = agent.call("POST", path, body)
            assert response.status_code == status, response.text
            assert words in response.json()["error"]["message"]
            assert response.json()["error"]["field"] == "agent"

        refused({"agent": "nobody"}, 400, "'nobody' is not an agent of room")
        refused({"agent": "scout"}, 400, "cannot hand off to itself")
        other = Api(hub.url, admin.post("/users", {"id": "eve", "name": "Eve"})["api_key"])
        assert other.call("POST", path, {"agent": "helper"}).status_code == 404  # not in the room

        handed = agent.post(path, {"agent": "napper", "reason": "slow"}, status=200)
        assert handed["status"] == "handoff" and handed["reason"] == "handed off to napper: slow"
        napping = ended(admin, room, "napper", "working")
        refused({"agent": "helper"}, 409, f"already waits on execution '{napping['id']}'")
        admin.post(f"/executions/{napping['id']}/cancel", None, status=200)
        agent.post(f"/agent/messages/{delivery['delivery_id']}/ack", None, status=204)
        woken = agent.get("/agent/messages/next")
        assert woken["message"]["text"].startswith("[ranch] the handoff to napper canceled")
        assert ended(admin, room, "scout", "working")["handoff_to"] is None

        handed = agent.post(
            path, {"agent": "helper", "reason": "logs", "message": "read the logs"}, status=200
        )
        assert handed["status"] == "handoff" and handed["handoff_to"] is not None
        child = ended(admin, room, "helper")
        assert child["parent_execution_id"] == execution["id"] and child["id"] == handed["handoff_to"]
        agent.post(f"/agent/messages/{woken['delivery_id']}/ack", None, status=204)
        woken = agent.get("/agent/messages/next")
        assert woken["message"]["text"] == "helper's answer to: read the logs"
        answer = {"text": "Fixed, thanks to the logs.", "reply_to": woken["delivery_id"]}
        agent.post(f"/rooms/{room}/messages", answer)
        assert ended(admin, room, "scout", "ready")["turns"] == 3


def test_a2a_callers_see_the_parent_working_and_the_child_referencing_it(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "to_napper", "napper")

        async def scenario() -> None:
            async with sdk_client(hub.agent_url("to_napper"), headers={"X-API-Key": ADMIN_KEY}) as client:
                (answer,) = await send(client, user_message("slow job", context_id=room))
                parent = answer.task
                assert parent.status.state == TaskState.TASK_STATE_WORKING  # A2A has no handoff state
                account = MessageToDict(parent.metadata)["ranch.execution"]
                child_id = account["children"][0]
                assert account["status"] == "handoff" and account["agent"] == "to_napper"
                assert account["reason"] == "handed off to napper: slow work"

                fetched = await client.get_task(GetTaskRequest(id=parent.id))
                assert fetched.status.state == TaskState.TASK_STATE_WORKING
                assert MessageToDict(fetched.metadata)["ranch.execution"]["children"] == [child_id]
                ended(admin, room, "napper", "working")  # the hub runs in its own thread
                child = await client.get_task(GetTaskRequest(id=child_id))
                assert child.context_id == room and child.status.state == TaskState.TASK_STATE_WORKING
                assert MessageToDict(child.metadata)["ranch.execution"]["parent"] == parent.id
                handing = [m for m in child.history if list(m.reference_task_ids)]
                assert [(text_of(m), list(m.reference_task_ids)) for m in handing] == [
                    ("handing over to napper", [parent.id])
                ]
                assert list(probes.RECEIVED["napper"][-1].reference_task_ids) == [parent.id]

                canceled = await client.cancel_task(CancelTaskRequest(id=parent.id))
                assert canceled.status.state == TaskState.TASK_STATE_CANCELED
                child = await client.get_task(GetTaskRequest(id=child_id))
                assert child.status.state == TaskState.TASK_STATE_CANCELED

        anyio.run(scenario)


def test_a_waiting_agent_answers_meanwhile_and_still_waits_and_its_end_cancels_the_child(
    tmp_path: Path,
) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        room = room_with(admin, "asker", "to_napper", "napper")
        admin.post(f"/rooms/{room}/messages", {"text": "@asker first"})
        child = ended(admin, room, "napper", "working")
        ended(admin, room, "asker", "handoff")
        admin.post(f"/rooms/{room}/messages", {"text": "@asker how is it going?"})
        wait_until(
            lambda: admin.messages(room)[-1]["text"] == "asker got: how is it going?", what="its answer"
        )
        waiting = ended(admin, room, "asker", "handoff")  # answered, and still waiting on its child
        assert waiting["turns"] == 2 and waiting["handoff_to"] == child["id"]
        task = admin.get(f"/executions/{waiting['id']}/task")
        assert task["status"]["state"] == "TASK_STATE_WORKING"
        assert task["metadata"]["ranch.execution"]["children"] == [child["id"]]

        admin.post(f"/executions/{child['id']}/cancel", None, status=200)
        assert ended(admin, room, "asker", "ready")["turns"] == 3  # woken with "canceled", then idle

        admin.post(f"/rooms/{room}/messages", {"text": "@to_napper first"})  # hands off, then ...
        child = ended(admin, room, "napper", "working")
        admin.post(f"/rooms/{room}/messages", {"text": "@to_napper never mind"})  # ... declares itself done
        parent = ended(admin, room, "to_napper")
        canceled = ended(admin, room, "napper", "canceled")
        assert (
            canceled["id"] == child["id"]
            and canceled["reason"] == f"its parent execution {parent['id']} ended"
        )


def test_a_handoff_to_an_external_agent_outlives_a_restart(tmp_path: Path) -> None:
    database = tmp_path / "hub.db"
    with serve_ranch(CONFIG, database) as hub:
        admin = Api(hub.url, ADMIN_KEY)
        scout = admin.post("/agents", {"id": "scout", "kind": "external"})
        room = room_with(admin, "to_scout", "scout")
        admin.post(f"/rooms/{room}/messages", {"text": "@to_scout find the cause"})
        child = ended(admin, room, "scout", "working")
        parent = ended(admin, room, "to_scout", "handoff")
        assert child["parent_execution_id"] == parent["id"]

    with serve_ranch(CONFIG, database) as hub:  # the parent still waits; the external child still works
        admin, agent = Api(hub.url, ADMIN_KEY), Api(hub.url, scout["api_key"])
        assert ended(admin, room, "to_scout", "handoff")["handoff_to"] == child["id"]
        delivery = agent.get("/agent/messages/next")
        assert delivery["message"]["text"] == "handing over to scout"
        agent.post(f"/rooms/{room}/messages", {"text": "a loose cable", "reply_to": delivery["delivery_id"]})
        assert ended(admin, room, "scout")["id"] == child["id"]  # its answer completes the work handed over
        assert ended(admin, room, "to_scout")["id"] == parent["id"]
        assert admin.messages(room)[-1]["text"] == "to_scout got: a loose cable"


def test_a_remote_a2a_agent_hands_off_with_the_routing_extension(tmp_path: Path) -> None:
    with (
        handing_peer("helper") as (url, peer),
        serve_ranch(CONFIG, tmp_path / "hub.db", allow_private_outbound=True) as hub,
    ):
        admin = Api(hub.url, ADMIN_KEY)
        admin.post("/agents", {"id": "remote", "kind": "remote", "url": url})
        room = room_with(admin, "remote", "helper")
        admin.post(f"/rooms/{room}/messages", {"text": "@remote fix it"})
        child = ended(admin, room, "helper")
        wait_until(lambda: admin.messages(room)[-1]["sender"]["id"] == "remote", what="the peer woken")
        parent = ended(admin, room, "remote", "ready")
        assert child["parent_execution_id"] == parent["id"] and parent["turns"] == 2
        assert [m["text"] for m in admin.messages(room)][1:] == [
            "over to helper",
            "helper's answer to: over to helper",
            "peer got: helper's answer to: over to helper",
        ]
        assert len(peer.seen) == 2


def test_work_handed_over_and_canceled_before_it_began_is_never_run(tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        start = len(probes.RECEIVED["napper"])
        room = room_with(admin, "to_napper", "napper")
        admin.post(f"/rooms/{room}/messages", {"text": "@napper busy first"})
        busy = ended(admin, room, "napper", "working")
        admin.post(f"/rooms/{room}/messages", {"text": "@to_napper then this"})
        parent = ended(admin, room, "to_napper", "handoff")
        child = ended(admin, room, "napper", "submitted")  # queued behind the napper's first message
        admin.post(f"/executions/{parent['id']}/cancel", None, status=200)
        assert ended(admin, room, "napper", "canceled")["id"] == child["id"]
        admin.post(f"/executions/{busy['id']}/cancel", None, status=200)
        admin.post(f"/rooms/{room}/messages", {"text": "@napper and now?"})  # a later message runs
        latest = ended(admin, room, "napper", "working")
        assert [row["id"] for row in by_agent(admin, room)["napper"]] == [
            busy["id"],
            child["id"],
            latest["id"],
        ]
        received = wait_until(
            lambda: probes.RECEIVED["napper"][start:] if len(probes.RECEIVED["napper"]) > start + 1 else None
        )
        assert [message.parts[-1].text for message in received] == ["busy first", "and now?"]
