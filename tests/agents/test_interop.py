"""Interop: ranch teams with remote members built on the official a2a-sdk server (tests/_support/peers.py).

Every peer records the raw HTTP requests and the messages its executor received, so these
tests check the contract (docs/routing.md, /work/shared/specs/routing.md) on the wire:
extension data only for peers that declare it (SC-003), ids mapped per member, input-required
round trips, nested teams, and failures that end FAILED, name the agent and never hang.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from _support import probes
from _support.hubkit import serve_ranch
from _support.peers import ROUTING_URI, RecordedRequest, running_peer
from _support.sdk import sdk_client, send, trail_of, user_message
from _support.servers import free_port
from ranch.agents.base import CONTEXT_PART_KEY

TURN_LIMIT = 10.0
"""Upper bound for any one call to ranch in these tests."""


# --------------------------------------------------------------------------- helpers


async def ask(url: str, message: Message, extensions: list[str] | None = None) -> StreamResponse:
    """One SendMessage through the official client, bounded in time."""
    with anyio.fail_after(TURN_LIMIT):
        async with sdk_client(url, extensions=extensions) as client:
            [response] = await send(client, message)
    return response


async def ask_task(url: str, message: Message, extensions: list[str] | None = None) -> Task:
    response = await ask(url, message, extensions)
    assert response.HasField("task"), response
    return response.task


def text(message: Message) -> str:
    return "\n".join(part.text for part in message.parts if part.HasField("text"))


def hops(task: Task) -> list[str]:
    return [hop["agent"] for hop in trail_of(task)]


def error_of(task: Task) -> dict[str, Any]:
    return dict(MessageToDict(task.metadata).get(ROUTING_URI, {}).get("error", {}))


def request_text(request: RecordedRequest) -> str:
    """Headers and body of one recorded request, as one searchable string."""
    headers = "\n".join(f"{name}: {value}" for name, value in request.headers.items())
    return headers + "\n" + request.body.decode("utf-8", errors="replace")


async def get_json(url: str) -> Any:
    async with httpx.AsyncClient(timeout=5, trust_env=False) as http:
        response = await http.get(url)
    assert response.status_code == 200, response.text
    return response.json()


async def card_json(agent_url: str) -> dict[str, Any]:
    card: dict[str, Any] = await get_json(f"{agent_url}/.well-known/agent-card.json")
    return card


def remote(agent_id: str, url: str, timeout: float = 2) -> str:
    return f"""
  - id: {agent_id}
    kind: remote
    url: {url}
    timeout: {timeout}
"""


def duo_config(peer_url: str) -> str:
    """Team `duo`: a rules triage that always hands to the remote `member`, which answers the user."""
    return f"""
agents:
  - id: triage
    kind: rules
    rules:
      - {{reply: "over to the peer", route: member, reason: always}}
{remote("member", peer_url)}
teams:
  - id: duo
    members: [triage, member]
    default_agent: triage
    routes: {{member: user}}
"""


# --------------------------------------------------------------------------- 1. mixed team


@pytest.mark.anyio
async def test_mixed_team_routes_through_a_remote_router_peer(tmp_path: Path) -> None:
    """A local default agent hands over to a remote routing peer, which routes on to a local member."""
    with running_peer("router", route_to="worker", reason="the worker finishes it") as peer:
        config = f"""
agents:
  - id: triage
    kind: rules
    rules:
      - {{match: "research", reply: "to the scout", route: scout, reason: needs research}}
      - {{reply: "no idea", route: user}}
{remote("scout", peer.url)}
  - id: worker
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {{reply: "worker done: {{text}}", route: user, reason: finished}}
teams:
  - id: mixed
    members: [triage, scout, worker]
    default_agent: triage
"""
        with serve_ranch(config, tmp_path / "t.db") as ranch:
            task = await ask_task(ranch.agent_url("mixed"), user_message("research qubits"))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED, text(task.status.message)
    trail = trail_of(task)
    assert [(h["agent"], h["sender"], h["recipient"]) for h in trail] == [
        ("triage", "user", "scout"),
        ("scout", "triage", "worker"),
        ("worker", "scout", "user"),
    ]
    assert trail[1]["reason"] == "the worker finishes it"
    assert text(task.status.message).startswith("worker done: router saw:")
    assert "to the scout" in text(task.status.message)

    # What the executor of the remote peer saw.
    (seen,) = peer.recorder.messages
    data = seen.metadata[ROUTING_URI]
    assert data["sender"] == "triage"
    assert [card["id"] for card in data["agentCards"]] == ["triage", "worker"]
    assert all(card["supportsClientRouting"] for card in data["agentCards"])
    assert ROUTING_URI in seen.extensions
    assert ROUTING_URI in seen.requested_extensions
    # ... and the raw request that carried it.
    (post,) = peer.recorder.posts()
    assert ROUTING_URI in [uri.strip() for uri in post.headers["a2a-extensions"].split(",")]
    body_message = post.json()["params"]["message"]
    assert ROUTING_URI in body_message["extensions"]
    assert {c["id"] for c in body_message["metadata"][ROUTING_URI]["agentCards"]} == {"triage", "worker"}
    assert body_message["metadata"][ROUTING_URI]["sender"] == "triage"
    # The local worker got the remote peer's reply, with the remote peer as sender.
    (worker_got,) = probes.RECEIVED["worker"]
    assert MessageToDict(worker_got.metadata)[ROUTING_URI]["sender"] == "scout"


# --------------------------------------------------------------------------- 2. SC-003


SC003_CONFIG = """
agents:
  - id: triage
    kind: rules
    rules:
      - {{match: "plain", reply: "to the plain peer", route: plainpeer, reason: plain work}}
      - {{reply: "done: {{text}}", route: user}}
{plain}
  - id: worker
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {{reply: "worker ok", route: user}}
teams:
  - id: crew
    members: [triage, plainpeer, worker]
    default_agent: triage
    routes: {{plainpeer: user}}
"""


@pytest.mark.anyio
async def test_plain_peer_receives_no_extension_data_on_the_wire(tmp_path: Path) -> None:
    """SC-003: a remote peer that does not declare the extension never sees its URI or agentCards."""
    with running_peer("plain") as peer:
        config = SC003_CONFIG.format(plain=remote("plainpeer", peer.url))
        with serve_ranch(config, tmp_path / "t.db") as ranch:
            url = ranch.agent_url("crew")
            routed = await ask_task(url, user_message("plain work please"))
            to_plain = user_message(
                "straight to you",
                metadata={ROUTING_URI: {"recipient": "plainpeer", "reason": "user picked it"}},
            )
            to_plain.extensions.append(ROUTING_URI)
            addressed = await ask_task(url, to_plain, extensions=[ROUTING_URI])
            shorthand = await ask_task(url, user_message("again", metadata={"x-recipient": "plainpeer"}))

    for task in (routed, addressed, shorthand):
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, text(task.status.message)
    assert hops(routed) == ["triage", "plainpeer"]
    assert hops(addressed) == ["plainpeer"] and hops(shorthand) == ["plainpeer"]
    assert text(addressed.status.message).startswith("plain saw:")

    assert len(peer.recorder.messages) == 3
    assert len(peer.recorder.posts()) == 3
    for request in peer.recorder.requests:
        wire = request_text(request)
        assert ROUTING_URI not in wire, wire
        assert "agentCards" not in wire, wire
        assert "x-recipient" not in wire, wire
    for seen in peer.recorder.messages:
        assert seen.metadata == {} and seen.extensions == [] and seen.requested_extensions == []


# --------------------------------------------------------------------------- 3. nested teams


NESTED_CONFIG = """
agents:
  - id: front
    kind: rules
    rules:
      - {reply: "to the inner team", route: inner, reason: inner knows}
  - id: inner-lead
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {reply: "lead: {text}", route: inner-finisher, reason: finish it}
  - id: inner-finisher
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {reply: "inner answer: {text}", route: user, reason: done}
teams:
  - id: inner
    members: [inner-lead, inner-finisher]
    default_agent: inner-lead
  - id: outer
    members: [front, inner]
    default_agent: front
    routes: {inner: user}
"""


@pytest.mark.anyio
async def test_nested_team_in_process_is_one_hop_of_the_outer_team(tmp_path: Path) -> None:
    """A team member of a team runs its own members; the outer trail shows it as one hop."""
    with serve_ranch(NESTED_CONFIG, tmp_path / "t.db") as ranch:
        task = await ask_task(ranch.agent_url("outer"), user_message("hello nest"))

    assert task.status.state == TaskState.TASK_STATE_COMPLETED, text(task.status.message)
    assert hops(task) == ["front", "inner"]
    assert trail_of(task)[1]["sender"] == "front"
    assert text(task.status.message) == "inner answer: lead: to the inner team"
    assert [text(m).split("\n")[-1] for m in probes.RECEIVED["inner-lead"]] == ["to the inner team"]
    assert len(probes.RECEIVED["inner-finisher"]) == 1
    # The inner team's members were offered each other, not the outer team's members.
    lead_cards = MessageToDict(probes.RECEIVED["inner-lead"][0].metadata)[ROUTING_URI]["agentCards"]
    assert [card["id"] for card in lead_cards] == ["inner-finisher"]


@pytest.mark.anyio
async def test_nested_team_over_http_is_a_remote_member(tmp_path: Path) -> None:
    """Ranch B uses ranch A's team as a `kind: remote` member; the turn completes through it."""
    with serve_ranch(NESTED_CONFIG, tmp_path / "a.db") as ranch_a:
        inner_url = ranch_a.agent_url("inner")
        config_b = f"""
agents:
  - id: desk
    kind: rules
    rules:
      - {{reply: "to the far team", route: far, reason: far knows}}
{remote("far", inner_url, timeout=5)}
teams:
  - id: outer-b
    members: [desk, far]
    default_agent: desk
    routes: {{far: user}}
"""
        with serve_ranch(config_b, tmp_path / "b.db") as ranch_b:
            task = await ask_task(ranch_b.agent_url("outer-b"), user_message("hello from b"))
            far_card = await card_json(ranch_b.agent_url("far"))
            inner_card = await card_json(inner_url)

    assert task.status.state == TaskState.TASK_STATE_COMPLETED, text(task.status.message)
    assert hops(task) == ["desk", "far"]
    assert text(task.status.message) == "inner answer: lead: to the far team"
    assert len(probes.RECEIVED["inner-lead"]) == 1 and len(probes.RECEIVED["inner-finisher"]) == 1
    assert ROUTING_URI in [ext["uri"] for ext in inner_card["capabilities"]["extensions"]]
    # B built the far member's card from the card it fetched from A.
    assert ROUTING_URI in [ext["uri"] for ext in far_card["capabilities"]["extensions"]]


# --------------------------------------------------------------------------- 4. failures


def failure_config(peer_url: str, timeout: float = 2) -> str:
    return f"""
agents:
  - id: triage
    kind: rules
    rules:
      - {{match: "go", reply: "handing over to the peer", route: peer, reason: peer work}}
      - {{reply: "triage alone: {{text}}", route: user}}
{remote("peer", peer_url, timeout)}
teams:
  - id: crew
    members: [triage, peer]
    default_agent: triage
"""


async def assert_fails_naming_peer(
    tmp_path: Path, peer_url: str, member_timeout: float = 2
) -> tuple[Task, float]:
    """The turn ends FAILED naming `peer`, keeps triage's hop and reply; ranch still answers after."""
    with serve_ranch(failure_config(peer_url, member_timeout), tmp_path / "t.db") as ranch:
        url = ranch.agent_url("crew")
        started = time.monotonic()
        task = await ask_task(url, user_message("go now"))
        elapsed = time.monotonic() - started

        assert task.status.state == TaskState.TASK_STATE_FAILED, text(task.status.message)
        assert "agent 'peer'" in text(task.status.message)
        assert error_of(task).get("agent") == "peer"
        assert [(h["agent"], h["recipient"]) for h in trail_of(task)] == [("triage", "peer")]
        assert [a.name for a in task.artifacts] == ["triage"]
        assert [p.text for p in task.artifacts[0].parts] == ["handing over to the peer"]

        assert (await get_json(f"{ranch.url}/healthz"))["status"] == "ok"
        after = await ask_task(url, user_message("hello"))
        assert after.status.state == TaskState.TASK_STATE_COMPLETED
        assert text(after.status.message) == "triage alone: hello"
    return task, elapsed


@pytest.mark.anyio
async def test_remote_peer_down_fails_the_turn_naming_the_agent(tmp_path: Path) -> None:
    """A remote member with nothing listening ends the turn FAILED, naming it, without hanging."""
    task, elapsed = await assert_fails_naming_peer(tmp_path, f"http://127.0.0.1:{free_port()}")
    assert elapsed < 5
    assert error_of(task)["type"] == "AgentUnavailable"


@pytest.mark.anyio
async def test_slow_remote_peer_times_out_within_its_timeout(tmp_path: Path) -> None:
    """A remote member slower than its `timeout` ends the turn FAILED within timeout + 3 s."""
    with running_peer("slow", delay=5) as peer:
        task, elapsed = await assert_fails_naming_peer(tmp_path, peer.url, member_timeout=1)
        peer.recorder.wait_for_messages(1)
    assert elapsed < 1 + 3
    assert error_of(task)["type"] == "AgentTimeout"
    assert "timeout of 1s" in text(task.status.message)


@pytest.mark.anyio
async def test_garbage_remote_peer_fails_the_turn_naming_the_agent(tmp_path: Path) -> None:
    """A remote member that answers with non-JSON ends the turn FAILED, naming it."""
    with running_peer("garbage") as peer:
        task, elapsed = await assert_fails_naming_peer(tmp_path, peer.url)
        assert len(peer.recorder.posts()) == 1
    assert elapsed < 5


@pytest.mark.anyio
async def test_failing_remote_peer_fails_the_turn_naming_the_agent(tmp_path: Path) -> None:
    """A remote member whose executor raises ends the turn FAILED, naming it."""
    with running_peer("failing", error="peer exploded") as peer:
        task, elapsed = await assert_fails_naming_peer(tmp_path, peer.url)
        (seen,) = peer.recorder.messages
        assert seen.text.endswith("handing over to the peer")
    assert elapsed < 5


# --------------------------------------------------------------------------- 5. input required


def asker_config(peer_url: str) -> str:
    return f"""
agents:
  - id: triage
    kind: rules
    rules:
      - {{match: "book", reply: "the booker will ask", route: booker, reason: booking}}
      - {{reply: "triage: {{text}}", route: user}}
{remote("booker", peer_url, timeout=5)}
teams:
  - id: desk
    members: [triage, booker]
    default_agent: triage
    routes: {{booker: user}}
"""


async def input_required_round_trip(tmp_path: Path, *, with_task_id: bool) -> None:
    with running_peer("asker", question="Which name, please?") as peer:
        with serve_ranch(asker_config(peer.url), tmp_path / "t.db") as ranch:
            url = ranch.agent_url("desk")
            first = await ask_task(url, user_message("book a table"))

            assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, text(first.status.message)
            assert text(first.status.message) == "Which name, please?"
            assert hops(first) == ["triage", "booker"]

            follow_up = user_message(
                "Ada", context_id=first.context_id, task_id=first.id if with_task_id else ""
            )
            second = await ask_task(url, follow_up)

    assert second.status.state == TaskState.TASK_STATE_COMPLETED, text(second.status.message)
    assert second.context_id == first.context_id
    if with_task_id:
        assert second.id == first.id
    assert hops(second) == ["booker"]
    answer = text(second.status.message)
    assert answer.startswith("Hello, ") and answer.endswith("Ada!")

    asked, answered = peer.recorder.messages
    assert asked.task_id, "the peer opened a task for the question"
    assert answered.task_id == asked.task_id
    assert answered.context_id == asked.context_id
    assert answered.text.endswith("Ada")
    # the follow-up on the wire named the remote task, not ranch's
    body = peer.recorder.posts()[1].json()["params"]["message"]
    assert body["taskId"] == asked.task_id
    assert body.get("contextId") == asked.context_id


@pytest.mark.anyio
async def test_input_required_round_trip_with_the_team_task_id(tmp_path: Path) -> None:
    """A follow-up naming the team task goes back to the asking peer and continues its remote task."""
    await input_required_round_trip(tmp_path, with_task_id=True)


@pytest.mark.anyio
async def test_input_required_round_trip_by_context_only(tmp_path: Path) -> None:
    """A follow-up in the same context (no taskId) goes back to the asking peer's same remote task."""
    await input_required_round_trip(tmp_path, with_task_id=False)


@pytest.mark.anyio
async def test_nested_team_over_http_relays_input_required(tmp_path: Path) -> None:
    """A question asked deep inside a remote team reaches the user, and the answer goes back to it."""
    with running_peer("asker", question="Which name, please?") as peer:
        with serve_ranch(asker_config(peer.url), tmp_path / "a.db") as ranch_a:
            config_b = f"""
agents:
  - id: front
    kind: rules
    rules:
      - {{reply: "book a table, says front", route: far, reason: far books}}
{remote("far", ranch_a.agent_url("desk"), timeout=5)}
teams:
  - id: outer-b
    members: [front, far]
    default_agent: front
    routes: {{far: user}}
"""
            with serve_ranch(config_b, tmp_path / "b.db") as ranch_b:
                url = ranch_b.agent_url("outer-b")
                first = await ask_task(url, user_message("I want dinner"))
                assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED, text(first.status.message)
                assert text(first.status.message) == "Which name, please?"
                second = await ask_task(
                    url, user_message("Ada", context_id=first.context_id, task_id=first.id)
                )

    assert second.status.state == TaskState.TASK_STATE_COMPLETED, text(second.status.message)
    assert hops(first) == ["front", "far"] and hops(second) == ["far"]
    assert text(second.status.message).endswith("Ada!")
    asked, answered = peer.recorder.messages
    assert asked.task_id and answered.task_id == asked.task_id


# --------------------------------------------------------------------------- 6. multi-turn


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["plain", "router"])
async def test_remote_member_keeps_one_remote_context_across_turns(tmp_path: Path, kind: str) -> None:
    """Two turns in one contextId reach the remote member in one (its own) remote contextId."""
    with running_peer(kind, route_to="user") as peer:
        config = duo_config(peer.url)
        with serve_ranch(config, tmp_path / "t.db") as ranch:
            url = ranch.agent_url("duo")
            first = await ask_task(url, user_message("turn one"))
            second = await ask_task(url, user_message("turn two", context_id=first.context_id))
            other = await ask_task(url, user_message("another conversation"))

    for task in (first, second, other):
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, text(task.status.message)
    assert second.context_id == first.context_id and other.context_id != first.context_id
    one, two, three = peer.recorder.messages
    assert one.context_id and one.context_id == two.context_id
    assert three.context_id != one.context_id
    assert "user: turn one" in one.text and "user: turn two" in two.text


# --------------------------------------------------------------------------- 7. served remote


@pytest.mark.anyio
async def test_remote_agent_served_directly_by_ranch(tmp_path: Path) -> None:
    """Ranch serves a remote agent at /a2a/agents/<id>; the official client gets the peer's answer."""
    with running_peer("plain") as plain, running_peer("router") as router:
        config = f"""
agents:
{remote("helper", plain.url)}
{remote("decider", router.url)}
"""
        with serve_ranch(config, tmp_path / "t.db") as ranch:
            direct = await ask(ranch.agent_url("helper"), user_message("hi there"))
            tasked = await ask_task(ranch.agent_url("decider"), user_message("decide"))
            card = await card_json(ranch.agent_url("helper"))

    assert direct.HasField("message"), direct
    assert text(direct.message) == "plain saw: hi there"
    assert direct.message.context_id and not direct.message.task_id
    assert card["name"] == "plain peer"
    assert [m.text for m in plain.recorder.messages] == ["hi there"]

    assert tasked.status.state == TaskState.TASK_STATE_COMPLETED
    assert text(tasked.status.message) == "router saw: decide"
    assert tasked.id != router.recorder.messages[0].task_id  # ranch's own task id, not the peer's


@pytest.mark.anyio
async def test_remote_asker_served_directly_round_trips_through_ranch(tmp_path: Path) -> None:
    """A proxied remote agent's input-required task continues through ranch's own task id."""
    with running_peer("asker") as peer:
        with serve_ranch(f"agents:\n{remote('booker', peer.url)}", tmp_path / "t.db") as ranch:
            url = ranch.agent_url("booker")
            first = await ask_task(url, user_message("hi"))
            assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            assert text(first.status.message) == "What is your name?"
            second = await ask_task(url, user_message("Ada", context_id=first.context_id, task_id=first.id))

    assert second.id == first.id
    assert second.status.state == TaskState.TASK_STATE_COMPLETED, text(second.status.message)
    assert text(second.status.message) == "Hello, Ada!"
    asked, answered = peer.recorder.messages
    assert asked.task_id and answered.task_id == asked.task_id
    assert first.id != asked.task_id


# --------------------------------------------------------------------------- bugs found on the way


@pytest.mark.anyio
async def test_team_task_is_stored_in_its_final_state(tmp_path: Path) -> None:
    """GetTask after a turn returns the state the turn ended in (FAILED at a dead peer, or COMPLETED)."""
    config = failure_config(f"http://127.0.0.1:{free_port()}")
    with serve_ranch(config, tmp_path / "t.db") as ranch:
        with anyio.fail_after(TURN_LIMIT * 2):
            async with sdk_client(ranch.agent_url("crew")) as client:
                answered, stored = [], []
                for turn in range(8):
                    [response] = await send(client, user_message("go" if turn % 2 else "hello"))
                    answered.append(TaskState.Name(response.task.status.state))
                    got = await client.get_task(GetTaskRequest(id=response.task.id))
                    stored.append(TaskState.Name(got.status.state))
    assert answered == ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED"] * 4
    assert stored == answered


@pytest.mark.anyio
async def test_cancelling_a_team_task_cancels_the_remote_hop(tmp_path: Path) -> None:
    """CancelTask on a team task whose hop is at a remote peer cancels the peer's task too."""
    with running_peer("slow", delay=5) as peer:
        with serve_ranch(failure_config(peer.url, timeout=10), tmp_path / "t.db") as ranch:
            with anyio.fail_after(TURN_LIMIT):
                async with sdk_client(ranch.agent_url("crew")) as client:
                    request = SendMessageRequest(
                        message=user_message("go slowly"),
                        configuration=SendMessageConfiguration(return_immediately=True),
                    )
                    [response] = [r async for r in client.send_message(request)]
                    (seen,) = peer.recorder.wait_for_messages(1)
                    # let the peer's first Task event reach ranch: its id is what ranch can cancel
                    await anyio.sleep(0.5)
                    canceled = await client.cancel_task(CancelTaskRequest(id=response.task.id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            assert peer.recorder.wait_for_cancel(timeout=3) == [seen.task_id]


@pytest.mark.anyio
async def test_remote_member_is_not_shown_its_own_reply_as_new(tmp_path: Path) -> None:
    """The context part of turn two holds what the member has not seen, which excludes its own reply."""
    with running_peer("plain") as peer:
        config = duo_config(peer.url)
        with serve_ranch(config, tmp_path / "t.db") as ranch:
            url = ranch.agent_url("duo")
            first = await ask_task(url, user_message("turn one"))
            await ask_task(url, user_message("turn two", context_id=first.context_id))

    second_post = peer.recorder.posts()[1].json()["params"]["message"]
    [context_part] = [p for p in second_post["parts"] if CONTEXT_PART_KEY in p.get("metadata", {})]
    # new to the member in turn two: only the user's message (triage's reply is the content itself)
    assert context_part["text"] == "[ranch] Conversation so far (new to you):\nuser: turn two"
