"""ranch as an A2A server: cards, both bindings, both versions, tasks, errors (docs/surface.md).

Every server runs on 127.0.0.1 through `serve_ranch`; every wait is bounded, so a
broken server fails a test instead of hanging it. The config is the demo helpdesk
plus scripted probe agents (tests/_support/probes.py) where a test needs a slow member.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from a2a.client import A2ACardResolver, Client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError
from google.protobuf.json_format import MessageToDict

from _support.hubkit import RunningRanch, serve_ranch
from _support.sdk import sdk_client, send, trail_of, user_message
from ranch.agents.base import text_of
from ranch.cli.demo import DEMO_YAML
from ranch.wire.client_routing import URI

# -- configuration ---------------------------------------------------------------------------------

_EXTRA_AGENTS = """
  - id: slow
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    timeout: 60
    options: {sleep: 30, reply: "slow answer", route: user, reason: done}
  - id: steady
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {sleep: 0.2, reply: "steady saw: {text}", route: user, reason: answered}
  - id: step1
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {sleep: 0.4, reply: "step1 done", route: step2, reason: second step}
  - id: step2
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {sleep: 0.4, reply: "step2 done", route: user, reason: finished}
  - id: guarded
    kind: echo
    require_extensions: ["urn:x-required"]
"""

_EXTRA_TEAMS = """
  - id: slowdesk
    members: [slow]
    default_agent: slow
  - id: relay
    members: [steady]
    default_agent: steady
  - id: pipeline
    members: [step1, step2]
    default_agent: step1
"""

assert DEMO_YAML.count("\nteams:\n") == 1
YAML = DEMO_YAML.replace("\nteams:\n", _EXTRA_AGENTS + "\nteams:\n") + _EXTRA_TEAMS
"""The demo (triage, researcher, writer, echo; team helpdesk) plus:

- slowdesk: a team whose only member sleeps 30 s (for cancel);
- relay: one member taking 0.2 s (tasks whose checks should not depend on how quickly the
  task is stored; test_completed_team_tasks_are_stored_completed covers the instant case);
- pipeline: two 0.4 s members in a row (for SubscribeToTask);
- guarded: an echo agent that requires the extension `urn:x-required`.
"""

RULES_AGENTS = ("triage", "researcher", "writer")
TEAMS = ("helpdesk", "slowdesk", "relay", "pipeline")
ALL_IDS = ("triage", "researcher", "writer", "echo", "slow", "steady", "step1", "step2", "guarded", *TEAMS)

BINDINGS = ("JSONRPC", "HTTP+JSON")
V1 = {"A2A-Version": "1.0"}
TIMEOUT = 10.0
"""Upper bound for one client round trip."""

PAPERS = "find papers on quantum error correction"
PAPERS_ROUTE = ["triage", "researcher", "triage"]
NOTE = "write a note about the offsite"
NOTE_ROUTE = ["triage", "writer", "triage"]

COMPLETED = TaskState.TASK_STATE_COMPLETED
WORKING = TaskState.TASK_STATE_WORKING
CANCELED = TaskState.TASK_STATE_CANCELED

# -- helpers ---------------------------------------------------------------------------------------


def agents_of(task: Task) -> list[str]:
    return [hop["agent"] for hop in trail_of(task)]


def healthy(ranch: RunningRanch) -> bool:
    response = httpx.get(f"{ranch.url}/healthz", timeout=TIMEOUT)
    return response.status_code == 200 and response.json()["status"] == "ok"


def message_json(text: str = "hello", **fields: Any) -> dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": text}], **fields}


def rpc(
    url: str,
    method: str,
    params: dict[str, Any],
    *,
    headers: dict[str, str] | None = None,
    request_id: int = 1,
) -> httpx.Response:
    """One raw JSON-RPC call, as curl would make it (A2A 1.0 unless `headers` say otherwise)."""
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
    return httpx.post(url, json=body, headers=V1 if headers is None else headers, timeout=TIMEOUT)


async def ask(client: Client, text: str, *, context_id: str = "", within: float = TIMEOUT) -> Task:
    """SendMessage (non-streaming) and return the Task it answers with, within `within` s."""
    with anyio.fail_after(within):
        [response] = await send(client, user_message(text, context_id=context_id))
    assert response.HasField("task"), MessageToDict(response)
    return response.task


async def start_in_background(client: Client, text: str) -> Task:
    """SendMessage with returnImmediately: the Task as soon as it exists, still running."""
    request = SendMessageRequest(
        message=user_message(text), configuration=SendMessageConfiguration(return_immediately=True)
    )
    with anyio.fail_after(TIMEOUT):
        responses = [response async for response in client.send_message(request)]
    assert len(responses) == 1 and responses[0].HasField("task"), [MessageToDict(r) for r in responses]
    return responses[0].task


def kind(response: StreamResponse) -> str:
    return str(response.WhichOneof("payload"))


# -- 1. the official SDK client, both bindings, both versions --------------------------------------

CLIENT_MODES = [
    pytest.param(binding, version, header, id=f"{binding}-{version}{'' if header else '-no-version-header'}")
    for binding in BINDINGS
    for version, header in (("1.0", True), ("0.3", True), ("0.3", False))
]


@pytest.mark.anyio
@pytest.mark.parametrize(("binding", "version", "header"), CLIENT_MODES)
async def test_sdk_client_gets_card_task_and_per_hop_stream(
    tmp_path: Path, binding: str, version: str, header: bool
) -> None:
    """The SDK client gets a card declaring routing, a COMPLETED team task with trail, a per-hop stream."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        url = ranch.agent_url("helpdesk")
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
        assert URI in [ext.uri for ext in card.capabilities.extensions]
        interfaces = {(i.protocol_binding, i.url) for i in card.supported_interfaces}
        assert {("JSONRPC", url), ("HTTP+JSON", url)} <= interfaces

        async with sdk_client(url, binding=binding, version=version, send_version_header=header) as client:
            task = await ask(client, PAPERS)
        assert task.status.state == COMPLETED
        assert agents_of(task) == PAPERS_ROUTE
        assert [hop["recipient"] for hop in trail_of(task)] == ["researcher", "triage", "user"]
        assert "Research notes" in text_of(task.status.message)

        async with sdk_client(
            url, binding=binding, version=version, send_version_header=header, streaming=True
        ) as client:
            with anyio.fail_after(TIMEOUT):
                events = await send(client, user_message(PAPERS))
        kinds = [kind(event) for event in events]
        assert kinds == ["task"] + ["status_update", "artifact_update"] * 3 + ["status_update"], kinds
        statuses = [event.status_update for event in events if event.HasField("status_update")]
        assert [s.status.state for s in statuses] == [WORKING] * 3 + [COMPLETED]
        for status, agent in zip(statuses[:-1], PAPERS_ROUTE, strict=True):
            assert text_of(status.status.message).startswith(f"{agent} is working"), text_of(
                status.status.message
            )
        artifacts = [event.artifact_update.artifact for event in events if event.HasField("artifact_update")]
        assert [artifact.name for artifact in artifacts] == PAPERS_ROUTE
        final = statuses[-1]
        assert [hop["agent"] for hop in MessageToDict(final.metadata)[URI]["trail"]] == PAPERS_ROUTE


# -- 2. cards and the agent list -------------------------------------------------------------------


def test_cards_at_both_well_known_paths_and_agent_list(tmp_path: Path) -> None:
    """Both well-known paths serve the same card; /a2a/agents lists every agent and team with its card URL."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch, httpx.Client(timeout=TIMEOUT) as http:
        listing = http.get(f"{ranch.url}/a2a/agents")
        assert listing.status_code == 200
        entries = {entry["id"]: entry for entry in listing.json()["agents"]}
        assert set(entries) == set(ALL_IDS)
        for team in TEAMS:
            assert entries[team]["kind"] == "team"

        cards: dict[str, dict[str, Any]] = {}
        for agent_id, entry in entries.items():
            base = ranch.agent_url(agent_id)
            assert entry["card"] == f"{base}/.well-known/agent-card.json"
            new, old = http.get(entry["card"]), http.get(f"{base}/.well-known/agent.json")
            assert new.status_code == old.status_code == 200, agent_id
            assert new.json() == old.json(), agent_id
            cards[agent_id] = card = new.json()
            assert card["name"] == entry["name"]
            bindings = {(i["protocolBinding"], i["url"]) for i in card["supportedInterfaces"]}
            assert {("JSONRPC", base), ("HTTP+JSON", base)} <= bindings, agent_id

        def declared(agent_id: str) -> list[str]:
            return [ext["uri"] for ext in cards[agent_id]["capabilities"].get("extensions", [])]

        assert URI not in declared("echo")
        for agent_id in (*RULES_AGENTS, *TEAMS):
            assert URI in declared(agent_id), agent_id
        assert cards["helpdesk"]["name"] == "Helpdesk"
        skill_ids = {skill["id"] for skill in cards["helpdesk"]["skills"]}
        assert {"triage", "research", "write"} <= skill_ids  # the union of the members' skills

        missing = http.get(f"{ranch.url}/a2a/agents/nope/.well-known/agent-card.json")
        assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]


# -- 3. restart durability -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_tasks_survive_a_restart_on_the_same_database(tmp_path: Path) -> None:
    """A new server on the same SQLite file serves earlier team tasks (state, history, trail) to Get/List."""
    database = tmp_path / "t.db"
    with serve_ranch(YAML, database) as first:
        async with sdk_client(first.agent_url("helpdesk")) as client:
            papers = await ask(client, PAPERS)
            note = await ask(client, NOTE)
        async with sdk_client(first.agent_url("echo")) as client:
            with anyio.fail_after(TIMEOUT):
                [echoed] = await send(client, user_message("ping"))
        assert echoed.HasField("message")
    assert papers.status.state == note.status.state == COMPLETED
    assert papers.context_id != note.context_id

    with serve_ranch(YAML, database) as second:
        for binding in BINDINGS:
            async with sdk_client(second.agent_url("helpdesk"), binding=binding) as client:
                for before, route in ((papers, PAPERS_ROUTE), (note, NOTE_ROUTE)):
                    with anyio.fail_after(TIMEOUT):
                        after = await client.get_task(GetTaskRequest(id=before.id))
                    state = TaskState.Name(after.status.state)
                    assert after.status.state == COMPLETED, f"{binding}: task {before.id} came back {state}"
                    assert after.context_id == before.context_id
                    assert agents_of(after) == route
                    assert [m.message_id for m in after.history] == [m.message_id for m in before.history]
                    assert text_of(after.history[0]) == text_of(before.history[0])
                    assert text_of(after.status.message) == text_of(before.status.message)
                with anyio.fail_after(TIMEOUT):
                    listed = await client.list_tasks(ListTasksRequest())
                    in_context = await client.list_tasks(ListTasksRequest(context_id=papers.context_id))
                assert {task.id for task in listed.tasks} == {papers.id, note.id}
                assert [task.id for task in in_context.tasks] == [papers.id]
                assert in_context.tasks[0].status.state == COMPLETED
            async with sdk_client(second.agent_url("echo"), binding=binding) as client:
                with anyio.fail_after(TIMEOUT):
                    assert list((await client.list_tasks(ListTasksRequest())).tasks) == []


# -- 4. GetTask historyLength, ListTasks pagination, per-agent listing -----------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_history_length_pagination_and_per_agent_tasks(tmp_path: Path, binding: str) -> None:
    """historyLength trims history; ListTasks pages by pageSize/pageToken; tasks stay with their agent."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("relay"), binding=binding) as client:
            tasks = [await ask(client, f"question {n}") for n in range(3)]
            ids = {task.id for task in tasks}
            assert len(ids) == 3
            with anyio.fail_after(TIMEOUT):
                full = await client.get_task(GetTaskRequest(id=tasks[0].id))
                trimmed = await client.get_task(GetTaskRequest(id=tasks[0].id, history_length=1))
            assert full.status.state == COMPLETED
            assert len(full.history) >= 2, [text_of(m) for m in full.history]
            assert list(trimmed.history) == list(full.history)[-1:]

            seen: list[str] = []
            token = ""
            with anyio.fail_after(TIMEOUT):
                for _ in range(10):
                    page = await client.list_tasks(ListTasksRequest(page_size=1, page_token=token))
                    assert len(page.tasks) <= 1
                    seen += [task.id for task in page.tasks]
                    token = page.next_page_token
                    if not token:
                        break
            assert sorted(seen) == sorted(ids), "each task exactly once across the pages"

        async with sdk_client(ranch.agent_url("helpdesk"), binding=binding) as other:
            with anyio.fail_after(TIMEOUT):
                assert [task.id for task in (await other.list_tasks(ListTasksRequest())).tasks] == []
                with pytest.raises(TaskNotFoundError):
                    await other.get_task(GetTaskRequest(id=tasks[0].id))


# -- 5. CancelTask ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_cancel_running_team_task_and_cancel_errors(tmp_path: Path) -> None:
    """CancelTask stops a slow team hop in < 5 s and it stays CANCELED; ended/unknown tasks: -32002/-32001."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("slowdesk")) as client:
            running = await start_in_background(client, "take your time")
            assert running.status.state not in (COMPLETED, CANCELED)
            with anyio.fail_after(TIMEOUT):
                canceled = await client.cancel_task(CancelTaskRequest(id=running.id))
            assert canceled.id == running.id
            assert canceled.status.state == CANCELED
            await anyio.sleep(0.3)
            with anyio.fail_after(TIMEOUT):
                again = await client.get_task(GetTaskRequest(id=running.id))
            assert again.status.state == CANCELED

        async with sdk_client(ranch.agent_url("relay")) as client:
            done = await ask(client, "quick one")
        assert done.status.state == COMPLETED
        refused = rpc(ranch.agent_url("relay"), "CancelTask", {"id": done.id}).json()
        assert refused["error"]["code"] == -32002, refused
        assert done.id in refused["error"]["message"]
        unknown = rpc(ranch.agent_url("relay"), "CancelTask", {"id": "no-such-task"}).json()
        assert unknown["error"]["code"] == -32001, unknown
        assert "no-such-task" in unknown["error"]["message"]
        assert healthy(ranch)


# -- 6. SubscribeToTask ----------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_subscribe_to_running_team_task(tmp_path: Path, binding: str) -> None:
    """SubscribeToTask on a running team task yields the current Task, then events up to the final status."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        url = ranch.agent_url("pipeline")
        async with sdk_client(url, binding=binding) as client:
            running = await start_in_background(client, "two steps please")
        async with sdk_client(url, binding=binding, streaming=True) as client:
            with anyio.fail_after(TIMEOUT):
                events = [event async for event in client.subscribe(SubscribeToTaskRequest(id=running.id))]
        assert events and events[0].HasField("task"), [kind(e) for e in events]
        assert events[0].task.id == running.id
        assert events[0].task.status.state not in (COMPLETED, CANCELED)
        later = events[1:]
        assert later and later[-1].HasField("status_update"), [kind(e) for e in events]
        assert later[-1].status_update.status.state == COMPLETED
        assert [hop["agent"] for hop in MessageToDict(later[-1].status_update.metadata)[URI]["trail"]] == [
            "step1",
            "step2",
        ]
        artifacts = [e.artifact_update.artifact.name for e in later if e.HasField("artifact_update")]
        assert artifacts[-1] == "step2", artifacts
        for event in later:
            assert event.WhichOneof("payload") in ("status_update", "artifact_update")


# -- 7. extension negotiation ----------------------------------------------------------------------


def test_extension_negotiation_and_required_extensions(tmp_path: Path) -> None:
    """A2A-Extensions echoes only activated extensions; a required one is enforced (-32008/400), declared."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        team = ranch.agent_url("helpdesk")
        asked = rpc(
            team,
            "SendMessage",
            {"message": message_json(PAPERS)},
            headers={**V1, "A2A-Extensions": f"{URI}, urn:unknown"},
        )
        assert asked.status_code == 200 and "result" in asked.json(), asked.text
        assert asked.headers.get("A2A-Extensions") == URI

        streamed = httpx.post(
            f"{team}/message:stream",
            json={"message": message_json(PAPERS)},
            headers={**V1, "A2A-Extensions": f"urn:unknown,{URI}"},
            timeout=TIMEOUT,
        )
        assert streamed.status_code == 200 and "TASK_STATE_COMPLETED" in streamed.text, streamed.text
        assert streamed.headers.get("A2A-Extensions") == URI

        plain = rpc(team, "SendMessage", {"message": message_json(PAPERS)})
        assert "result" in plain.json(), plain.text
        assert "A2A-Extensions" not in plain.headers

        guarded = ranch.agent_url("guarded")
        refused = rpc(guarded, "SendMessage", {"message": message_json("let me in")})
        error = refused.json()["error"]
        assert error["code"] == -32008, error
        assert "urn:x-required" in error["message"]
        rest = httpx.post(
            f"{guarded}/message:send", json={"message": message_json()}, headers=V1, timeout=TIMEOUT
        )
        assert rest.status_code == 400, rest.text
        assert "urn:x-required" in rest.json()["error"]["message"]

        named = {**V1, "A2A-Extensions": "urn:x-required"}
        accepted = rpc(guarded, "SendMessage", {"message": message_json("let me in")}, headers=named)
        assert accepted.json()["result"]["message"]["parts"] == [{"text": "let me in"}], accepted.text
        assert accepted.headers.get("A2A-Extensions") == "urn:x-required"
        rest_ok = httpx.post(
            f"{guarded}/message:send", json={"message": message_json()}, headers=named, timeout=TIMEOUT
        )
        assert rest_ok.status_code == 200, rest_ok.text

        card = httpx.get(f"{guarded}/.well-known/agent-card.json", timeout=TIMEOUT).json()
        assert {"uri": "urn:x-required", "required": True} in card["capabilities"]["extensions"]


# -- 8. bad input ----------------------------------------------------------------------------------


def jsonrpc_body(method: str = "SendMessage", request_id: int = 1, **params: Any) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})


def bad(
    case_id: str,
    body: bytes | str,
    names: str,
    *,
    code: int | None = None,
    status: int | None = None,
    agent: str = "helpdesk",
    suffix: str = "",
    headers: dict[str, str] = V1,
) -> Any:
    """One bad request: `code` is the JSON-RPC error code (None on HTTP+JSON paths), `status`
    the HTTP status (None = any), `names` what the error must mention."""
    return pytest.param(agent, suffix, body, headers, status, code, names, id=case_id)


_SEND = jsonrpc_body(request_id=7, message=message_json())
_BIG = message_json("x" * 2000)

BAD_INPUTS = [
    bad("malformed-json", b'{"jsonrpc": "2.0", "id": 1, "method": ', "not valid JSON", code=-32700),
    bad("not-an-object", b'"just a string"', "object", code=-32600),
    bad(
        "missing-jsonrpc",
        json.dumps({"id": 1, "method": "SendMessage", "params": {}}),
        "jsonrpc",
        code=-32600,
    ),
    bad("unknown-method", jsonrpc_body("ExplodeTask", message=message_json()), "method", code=-32601),
    bad("no-parts", jsonrpc_body(message={**message_json(), "parts": []}), "parts", code=-32602),
    bad(
        "part-without-content",
        jsonrpc_body(message={**message_json(), "parts": [{}]}),
        "parts[0]",
        code=-32602,
    ),
    bad("oversized-jsonrpc", jsonrpc_body(message=_BIG), "1000", code=-32600, status=413),
    bad("oversized-http-json", json.dumps({"message": _BIG}), "1000", status=413, suffix="/message:send"),
    bad("unknown-agent-jsonrpc", _SEND, "'nope'", code=-32050, status=404, agent="nope"),
    bad(
        "unknown-agent-http-json",
        json.dumps({"message": message_json()}),
        "'nope'",
        status=404,
        agent="nope",
        suffix="/message:send",
    ),
    bad("v1-method-without-version", _SEND, "version", code=-32009, headers={}),
    bad(
        "unknown-task-id",
        jsonrpc_body(message=message_json(taskId="no-such-task")),
        "no-such-task",
        code=-32001,
    ),
]


@pytest.mark.parametrize(("agent", "suffix", "body", "headers", "status", "code", "names"), BAD_INPUTS)
def test_bad_input_gets_a2a_error_and_server_stays_up(
    tmp_path: Path,
    agent: str,
    suffix: str,
    body: bytes | str,
    headers: dict[str, str],
    status: int | None,
    code: int | None,
    names: str,
) -> None:
    """Bad input gets the right A2A error code and a message naming the problem; /healthz still answers."""
    with serve_ranch(YAML, tmp_path / "t.db", max_body_bytes=1000) as ranch:
        response = httpx.post(
            ranch.agent_url(agent) + suffix,
            content=body,
            headers={**headers, "Content-Type": "application/json"},
            timeout=TIMEOUT,
        )
        if status is not None:
            assert response.status_code == status, response.text
        error = response.json()["error"]
        if code is not None:
            assert response.json()["jsonrpc"] == "2.0"
            assert error["code"] == code, error
        else:
            assert error["code"] == status, error
        assert names.lower() in json.dumps(error).lower(), error
        if agent == "nope" and code is not None:
            assert response.json()["id"] == 7  # the caller's request id is kept
        assert healthy(ranch)


def test_continuing_a_completed_task_is_refused(tmp_path: Path) -> None:
    """A message whose taskId names a finished task gets an error telling the caller to start a new task."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        url = ranch.agent_url("relay")
        task = rpc(url, "SendMessage", {"message": message_json("first")}).json()["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        again = rpc(url, "SendMessage", {"message": message_json("more", taskId=task["id"])}).json()
        assert "error" in again, again
        assert task["id"] in again["error"]["message"] and "completed" in again["error"]["message"]
        assert healthy(ranch)


# -- 9. direct agents ------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("binding", BINDINGS)
async def test_direct_agents_reply_with_messages(tmp_path: Path, binding: str) -> None:
    """Echo answers with a Message echoing the text; a rules agent's Message carries its routing decision."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("echo"), binding=binding) as client:
            with anyio.fail_after(TIMEOUT):
                [response] = await send(client, user_message("hello there"))
                listed = await client.list_tasks(ListTasksRequest())
        assert response.HasField("message"), MessageToDict(response)
        assert text_of(response.message) == "hello there"
        assert URI not in MessageToDict(response.message.metadata)
        assert list(listed.tasks) == []  # a direct reply makes no task

        async with sdk_client(ranch.agent_url("triage"), binding=binding) as client:
            with anyio.fail_after(TIMEOUT):
                [response] = await send(client, user_message(PAPERS))
        assert response.HasField("message"), MessageToDict(response)
        assert text_of(response.message).startswith("Routing to the researcher")
        decision = MessageToDict(response.message.metadata)[URI]
        assert decision == {"recipient": "researcher", "reason": "needs research"}


# -- bugs found while writing the above ------------------------------------------------------------


@pytest.mark.anyio
async def test_completed_team_tasks_are_stored_completed(tmp_path: Path) -> None:
    """Every COMPLETED team task reads back COMPLETED, with its trail, from GetTask after the call."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("helpdesk")) as client:
            tasks = [await ask(client, PAPERS) for _ in range(10)]
            await anyio.sleep(0.3)  # let any store write the run started settle
            stored: dict[str, str] = {}
            for task in tasks:
                assert task.status.state == COMPLETED
                with anyio.fail_after(TIMEOUT):
                    got = await client.get_task(GetTaskRequest(id=task.id))
                stored[task.id] = f"{TaskState.Name(got.status.state)}, trail {agents_of(got)}"
        expected = f"TASK_STATE_COMPLETED, trail {PAPERS_ROUTE}"
        wrong = {task_id: got for task_id, got in stored.items() if got != expected}
        assert not wrong, f"{len(wrong)} of {len(stored)} completed tasks read back otherwise: {wrong}"


@pytest.mark.anyio
async def test_second_turn_in_same_context_is_answered(tmp_path: Path) -> None:
    """A second message in the contextId of a finished team turn is answered (context not left locked)."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        async with sdk_client(ranch.agent_url("helpdesk")) as client:
            first = await ask(client, PAPERS)
            assert first.status.state == COMPLETED
            try:
                second = await ask(client, NOTE, context_id=first.context_id, within=5)
            except TimeoutError:
                pytest.fail(f"no answer within 5 s to a second turn in context {first.context_id}")
        assert second.status.state == COMPLETED
        assert second.context_id == first.context_id and second.id != first.id
        assert agents_of(second) == NOTE_ROUTE
