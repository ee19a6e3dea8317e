"""A remote member that misbehaves in every way the audit tried ends its hop FAILED, naming it.

The misbehaving peer (tests/_support/faulty.py) serves one agent per fault: too slow, HTTP 500,
bytes or JSON that are not A2A, a JSON-RPC error, streams without end (data, WORKING updates or
comments only), a connection dropped mid-stream or mid-event, an event that is not JSON, a card
that redirects inward. Each is called through a team, by the official a2a-sdk client, with
SendMessage and with SendStreamingMessage: the turn ends FAILED within the member's timeout
(plus the grace to cancel the peer's task), naming the member; the conversation keeps what came
before the fault; the peer's stream is closed; and ranch goes on answering.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import anyio
import pytest
from a2a.client import Client
from a2a.types import GetTaskRequest, Role, StreamResponse, Task, TaskState

from _support.faulty import FAULT_MODES, STREAMING_MODES, Faulty, running_faulty
from _support.hubkit import RunningRanch, eventually, serve_ranch, wait_until
from _support.sdk import sdk_client, send, trail_of, user_message
from ranch.agents.remote import CANCEL_GRACE

MEMBER_TIMEOUT = 1.5
"""Seconds each faulty member is given (its `timeout` in the config)."""

TURN_LIMIT = 20.0
"""A turn that takes longer than this hangs: the test fails instead of waiting."""


def agent_id(mode: str) -> str:
    return mode.replace("_", "-")


def config(faulty: Faulty) -> str:
    """Per fault, a team whose triage hands every turn to the faulty member (a static route)."""
    members = "\n".join(
        f'  - {{id: {agent_id(mode)}, kind: remote, url: "{faulty.url}/{mode}", timeout: {MEMBER_TIMEOUT}}}'
        for mode in FAULT_MODES
    )
    teams = "\n".join(
        f"  - {{id: t-{agent_id(mode)}, members: [triage, {agent_id(mode)}], default_agent: triage,"
        f" routes: {{triage: {agent_id(mode)}}}}}"
        for mode in FAULT_MODES
    )
    return f"""
agents:
  - id: triage
    kind: rules
    rules:
      - {{reply: "handing over: {{text}}"}}
{members}
teams:
{teams}
"""


@pytest.fixture(scope="module")
def faulty() -> Iterator[Faulty]:
    with running_faulty() as peer:
        yield peer


@pytest.fixture(scope="module")
def hub(faulty: Faulty, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    database = tmp_path_factory.mktemp("faulty") / "t.db"
    with serve_ranch(config(faulty), database, card_timeout=MEMBER_TIMEOUT) as ranch:
        yield ranch


def task_id_of(responses: list[StreamResponse]) -> str:
    for response in responses:
        if response.HasField("task"):
            return response.task.id
        if response.HasField("status_update"):
            return response.status_update.task_id
    raise AssertionError(f"no task in {responses}")


def text_of(task: Task) -> str:
    return " ".join(part.text for part in task.status.message.parts)


async def stored(client: Client, task_id: str) -> Task:
    return await client.get_task(GetTaskRequest(id=task_id, history_length=10))


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [False, True], ids=["SendMessage", "SendStreamingMessage"])
@pytest.mark.parametrize("mode", FAULT_MODES)
async def test_a_misbehaving_member_fails_the_turn_naming_it(
    hub: RunningRanch, faulty: Faulty, mode: str, streaming: bool
) -> None:
    member = agent_id(mode)
    context = uuid.uuid4().hex
    started = time.monotonic()
    with anyio.fail_after(TURN_LIMIT):
        async with sdk_client(hub.agent_url(f"t-{member}"), streaming=streaming) as client:
            responses = await send(client, user_message("go now", context_id=context))
            elapsed = time.monotonic() - started
            task = await stored(client, task_id_of(responses))

    assert task.status.state == TaskState.TASK_STATE_FAILED, text_of(task)
    assert f"agent '{member}'" in text_of(task)
    assert elapsed < MEMBER_TIMEOUT + CANCEL_GRACE + 2.0, f"{mode}: {elapsed:.1f}s"
    # What came before the fault is kept: the caller's message, triage's hop and its reply.
    assert [(h["agent"], h["recipient"]) for h in trail_of(task)] == [("triage", member)]
    asked = [m for m in task.history if m.role == Role.ROLE_USER]
    assert [p.text for m in asked for p in m.parts] == ["go now"]
    assert [p.text for a in task.artifacts if a.name == "triage" for p in a.parts] == ["handing over: go now"]
    assert faulty.internal.hits == []
    if mode in STREAMING_MODES:  # ranch hung up: the peer is not left writing to nobody
        wait_until(lambda: faulty.open_streams == 0, timeout=5, what=f"{mode}: the peer's stream closed")


@pytest.mark.anyio
async def test_ranch_answers_while_and_after_members_misbehave(hub: RunningRanch, faulty: Faulty) -> None:
    """Faulty members in flight do not stop another team's turn or the health check."""
    modes = ("slow", "endless", "endless_ping")
    before = {mode: faulty.calls.get(mode, 0) for mode in modes}
    async with anyio.create_task_group() as group:
        for mode in modes:
            group.start_soon(_turn, hub, f"t-{agent_id(mode)}")
        await eventually(
            lambda: all(faulty.calls.get(mode, 0) > before[mode] for mode in modes),
            within=TURN_LIMIT,
            what="each faulty member asked",
        )
        with anyio.fail_after(MEMBER_TIMEOUT):  # well before any of them ends
            async with sdk_client(hub.agent_url("triage")) as client:
                [response] = await send(client, user_message("still there?"))
    answer = response.message if response.HasField("message") else response.task.status.message
    assert [p.text for p in answer.parts] == ["handing over: still there?"]


async def _turn(hub: RunningRanch, team: str) -> None:
    with anyio.fail_after(TURN_LIMIT):
        async with sdk_client(hub.agent_url(team)) as client:
            await send(client, user_message("go now"))
