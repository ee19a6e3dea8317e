"""Tasks as a caller sees them: stored before they are told, listed on their current state.

- a task whose outcome cannot be stored (the SQLite file locked by another connection) is an
  error to the caller, on SendMessage and SendStreamingMessage, never a COMPLETED answer;
- ListTasks filters and sorts running tasks on their current state and status timestamp;
- `returnImmediately` answers at once with the stored SUBMITTED task, also while another turn
  of the same context holds the team;
- an unknown `status` filter is refused, naming the field, on both bindings.

Every server runs on 127.0.0.1 (`serve_ranch`), with scripted probe members (tests/_support/probes.py).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from _support import probes
from _support.hubkit import RunningRanch, serve_ranch, sqlite_locked, wait_until
from ranch.wire.client_routing import URI

YAML = """
agents:
  - id: first
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {sleep: 1.5, reply: "first done", route: second, reason: next step}
  - id: second
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {sleep: 4, reply: "second done", route: user, reason: done}
  - id: fast
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {reply: "fast saw: {text}", route: user, reason: done}
  - id: steady
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {sleep: 1, reply: "steady saw: {text}", route: user, reason: done}
teams:
  - id: desk
    members: [first, second, fast]
    default_agent: first
  - id: relay
    members: [steady]
    default_agent: steady
"""

V1 = {"A2A-Version": "1.0"}
TIMEOUT = 20.0
"""Upper bound for one round trip (a generous deadline: it turns a hang into a failure)."""
SUBMITTED, WORKING, COMPLETED = "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"
STORE_UNAVAILABLE = -32056


def message(text: str, *, to: str | None = None, context_id: str | None = None) -> dict[str, Any]:
    """A user message; `to` names the team member that should answer it first."""
    body: dict[str, Any] = {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": text}]}
    if to is not None:
        body["metadata"] = {URI: {"recipient": to}}
    if context_id is not None:
        body["contextId"] = context_id
    return body


def rpc(ranch: RunningRanch, agent: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = httpx.post(ranch.agent_url(agent), json=body, headers=V1, timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def result(answer: dict[str, Any]) -> dict[str, Any]:
    assert "result" in answer, answer
    data: dict[str, Any] = answer["result"]
    return data


def send(
    ranch: RunningRanch, agent: str, msg: dict[str, Any], *, immediately: bool = False
) -> dict[str, Any]:
    params: dict[str, Any] = {"message": msg}
    if immediately:
        params["configuration"] = {"returnImmediately": True}
    task: dict[str, Any] = result(rpc(ranch, agent, "SendMessage", params))["task"]
    return task


def list_tasks(ranch: RunningRanch, agent: str, binding: str, **query: Any) -> dict[str, Any]:
    """ListTasks over JSON-RPC or HTTP+JSON (`GET .../tasks?...`), as a dict."""
    if binding == "JSONRPC":
        return result(rpc(ranch, agent, "ListTasks", query))
    response = httpx.get(f"{ranch.agent_url(agent)}/tasks", params=query, headers=V1, timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    page: dict[str, Any] = response.json()
    return page


def ids(page: dict[str, Any]) -> list[str]:
    return [task["id"] for task in page.get("tasks", [])]


def stored_rows(database: Path) -> dict[str, str]:
    """Task id -> stored state, read straight from the SQLite file."""
    with sqlite3.connect(database, timeout=5) as connection:
        return dict(connection.execute("SELECT id, state FROM ranch_tasks").fetchall())


class Background:
    """One blocking call in a thread, so the test can act while it waits for its answer."""

    def __init__(self, call: Any) -> None:
        self.outcome: Any = None
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Any) -> None:
        self.outcome = call()

    def join(self) -> Any:
        self._thread.join(TIMEOUT)
        assert not self._thread.is_alive(), "no answer within the deadline"
        return self.outcome


def sse_events(ranch: RunningRanch, agent: str, msg: dict[str, Any]) -> list[dict[str, Any]]:
    """Every JSON-RPC frame of one SendStreamingMessage."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": msg}}
    frames = []
    with httpx.stream("POST", ranch.agent_url(agent), json=body, headers=V1, timeout=TIMEOUT) as response:
        for line in response.iter_lines():
            if line.startswith("data:"):
                frames.append(json.loads(line[5:]))
    return frames


# -- a task is told only once it is stored ---------------------------------------------------------


def test_an_outcome_the_store_does_not_take_is_an_error_not_a_completed_task(tmp_path: Path) -> None:
    """The SQLite file is locked mid-turn: the caller gets STORE_UNAVAILABLE, and the task is not
    COMPLETED afterwards; the same on a stream, whose last frame is the error."""
    database = tmp_path / "t.db"
    with serve_ranch(YAML, database, sqlite_busy_timeout=0.1) as ranch:
        assert send(ranch, "relay", message("warm up"))["status"]["state"] == COMPLETED
        before = set(stored_rows(database))

        pending = Background(lambda: rpc(ranch, "relay", "SendMessage", {"message": message("keep this")}))
        [task_id] = wait_until(lambda: set(stored_rows(database)) - before, what="the SUBMITTED row")
        with sqlite_locked(database):
            answer = pending.join()
        assert "result" not in answer, answer
        assert answer["error"]["code"] == STORE_UNAVAILABLE, answer
        assert task_id in answer["error"]["message"] and "completed" in answer["error"]["message"]
        after = result(rpc(ranch, "relay", "GetTask", {"id": task_id}))
        assert after["status"]["state"] != COMPLETED, after

        before = set(stored_rows(database))
        streamed = Background(lambda: sse_events(ranch, "relay", message("stream this")))
        wait_until(lambda: set(stored_rows(database)) - before, what="the streamed task's row")
        with sqlite_locked(database):
            frames = streamed.join()
        assert frames and frames[-1].get("error", {}).get("code") == STORE_UNAVAILABLE, frames
        states = [
            (frame["result"].get("task") or frame["result"].get("statusUpdate") or {}).get("status", {})
            for frame in frames[:-1]
        ]
        assert COMPLETED not in [status.get("state") for status in states], frames


# -- ListTasks on the current state ----------------------------------------------------------------


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_list_tasks_filters_and_orders_running_tasks_on_their_current_state(
    tmp_path: Path, binding: str
) -> None:
    """B runs (stored SUBMITTED, now WORKING on its second hop); C completed while B was on its first."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        running = send(ranch, "desk", message("two hops"), immediately=True)
        wait_until(lambda: probes.RECEIVED["first"], what="the first hop")
        done = send(ranch, "desk", message("one hop", to="fast"))
        assert done["status"]["state"] == COMPLETED
        wait_until(lambda: probes.RECEIVED["second"], what="the second hop")  # B: WORKING, newer than C

        everything = list_tasks(ranch, "desk", binding)
        assert ids(everything) == [running["id"], done["id"]], everything
        assert everything["totalSize"] == 2
        assert [t["status"]["state"] for t in everything["tasks"]] == [WORKING, COMPLETED]

        working = list_tasks(ranch, "desk", binding, status=WORKING)
        assert ids(working) == [running["id"]] and working["totalSize"] == 1, working
        submitted = list_tasks(ranch, "desk", binding, status=SUBMITTED)
        assert ids(submitted) == [] and submitted.get("totalSize", 0) == 0, submitted

        since = list_tasks(ranch, "desk", binding, statusTimestampAfter=done["status"]["timestamp"])
        assert ids(since) == [running["id"], done["id"]], since

        first = list_tasks(ranch, "desk", binding, pageSize=1)
        assert ids(first) == [running["id"]] and first["nextPageToken"], first
        second = list_tasks(ranch, "desk", binding, pageSize=1, pageToken=first["nextPageToken"])
        assert ids(second) == [done["id"]] and not second.get("nextPageToken"), second
        assert first["totalSize"] == second["totalSize"] == 2

        rpc(ranch, "desk", "CancelTask", {"id": running["id"]})


# -- returnImmediately -----------------------------------------------------------------------------


def test_return_immediately_answers_while_another_turn_of_the_context_runs(tmp_path: Path) -> None:
    """Three sends in one context to a team whose member takes 4 s: each is answered SUBMITTED and
    stored while the first turn still works."""
    database = tmp_path / "t.db"
    with serve_ranch(YAML, database) as ranch:
        context = str(uuid.uuid4())
        answers = [
            send(ranch, "desk", message(f"turn {n}", to="second", context_id=context), immediately=True)
            for n in range(3)
        ]
        assert [task["status"]["state"] for task in answers] == [SUBMITTED] * 3, answers
        assert all(task["contextId"] == context for task in answers)
        first = result(rpc(ranch, "desk", "GetTask", {"id": answers[0]["id"]}))
        assert first["status"]["state"] != COMPLETED, "answered before the first turn ended"
        rows = stored_rows(database)
        assert all(task["id"] in rows for task in answers), rows
        for task in answers:
            rpc(ranch, "desk", "CancelTask", {"id": task["id"]})


# -- an unknown status filter ----------------------------------------------------------------------


def test_an_unknown_status_filter_is_refused_naming_the_field(tmp_path: Path) -> None:
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        for value in ("TASK_STATE_NOPE", "working", 99):
            answer = rpc(ranch, "relay", "ListTasks", {"status": value})
            assert answer.get("error", {}).get("code") == -32602, answer
            assert answer["error"]["message"].startswith("status: ")
            assert answer["error"]["data"][0]["metadata"]["field"] == "status"

        url = f"{ranch.agent_url('relay')}/tasks"
        refused = httpx.get(url, params={"status": "TASK_STATE_NOPE"}, headers=V1, timeout=TIMEOUT)
        assert refused.status_code == 400, refused.text
        assert refused.json()["error"]["message"].startswith("status: 'TASK_STATE_NOPE' is not a task state")

        for binding in ("JSONRPC", "HTTP+JSON"):
            assert ids(list_tasks(ranch, "relay", binding, status=COMPLETED)) == []


def test_a_negative_history_length_is_refused(tmp_path: Path) -> None:
    """historyLength must be >= 0 on GetTask and SendMessage, as on ListTasks."""
    with serve_ranch(YAML, tmp_path / "t.db") as ranch:
        task = send(ranch, "desk", message("one hop", to="fast"))
        refused = rpc(ranch, "desk", "GetTask", {"id": task["id"], "historyLength": -1})
        assert refused.get("error", {}).get("code") == -32602, refused
        config = {"historyLength": -1}
        refused = rpc(ranch, "desk", "SendMessage", {"message": message("hi"), "configuration": config})
        assert refused.get("error", {}).get("code") == -32602, refused
        kept = rpc(ranch, "desk", "GetTask", {"id": task["id"], "historyLength": 0})
        assert "history" not in result(kept)
