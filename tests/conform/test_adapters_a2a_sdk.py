"""examples/routing_adapters/a2a_sdk.py: an a2a-sdk agent that knows nothing of routing, wrapped, in a
ranch team (issue 36, item 3).

The example's demo (a help desk answering with a completed task, `RoutingExecutor` with a keyword
`decide`) runs as its own process with the a2a-sdk alone; a ranch team has it as its default member
beside a local `billing` member. Its decision routes the team's turn, `ranch conform` passes it, and
its response header activates the extension exactly when the caller asked for it.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.types import Message, Part, Role

from _support.adapters import EXAMPLES, SCENARIOS, ask_team, conform, hops, serve_example, team_with, verdicts
from _support.hubkit import RunningRanch, serve_ranch
from _support.sdk import said, trail_of
from _support.servers import ServerThread
from ranch.wire.client_routing import URI


@pytest.fixture(scope="module")
def desk() -> Iterator[str]:
    """The demo, run by this venv's python: the a2a-sdk 1.x it needs is ranch's own."""
    with serve_example(Path(sys.executable), "a2a_sdk") as url:
        yield url


@pytest.fixture(scope="module")
def hub(desk: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with serve_ranch(team_with(desk), tmp_path_factory.mktemp("a2a-sdk") / "r.db") as served:
        yield served


def test_the_wrapped_agent_hands_an_invoice_to_the_billing_member(hub: RunningRanch) -> None:
    task = ask_team(hub.agent_url("team"), "My invoice is wrong: billing, please fix it.")
    assert hops(task) == [("desk", "billing"), ("billing", "user")]
    assert trail_of(task)[0]["reason"] == "billing handles it"
    assert said(task) == "Billing fixed the invoice."


def test_the_wrapped_agent_answers_the_user_when_no_peer_fits(hub: RunningRanch) -> None:
    task = ask_team(hub.agent_url("team"), "When do you open?")
    assert hops(task) == [("desk", "user")]
    assert said(task).startswith("Help desk: noted")


def test_the_wrapped_agent_passes_every_conformance_scenario(desk: str) -> None:
    report = conform(desk)
    assert verdicts(report) == dict.fromkeys(SCENARIOS, True), report.to_json()


def test_the_response_header_activates_the_extension_only_when_the_request_data_was_read(desk: str) -> None:
    def send(negotiated: bool) -> httpx.Response:
        message: dict[str, Any] = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]}
        headers = {"A2A-Version": "1.0"}
        if negotiated:
            message |= {"extensions": [URI], "metadata": {URI: {"agentCards": [], "sender": "user"}}}
            headers["A2A-Extensions"] = URI
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        return httpx.post(f"{desk}/", json=body, headers=headers, timeout=10)

    asked, plain = send(True), send(False)
    assert asked.headers.get("A2A-Extensions") == URI
    status = asked.json()["result"]["task"]["status"]
    assert status["message"]["metadata"][URI] == {"recipient": "user", "reason": "answered"}
    assert "A2A-Extensions" not in plain.headers
    assert URI not in plain.json()["result"]["task"]["status"]["message"].get("metadata", {})


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("a2a_sdk_example", EXAMPLES / "a2a_sdk.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_wrapped_executor_may_decide_itself_and_an_unoffered_recipient_is_dropped() -> None:
    """`set_decision` from inside the executor wins over `decide`; a recipient the request did not
    offer is no decision at all (the router decides), never sent on."""
    example = load_example()

    class Deciding(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            request = example.routing_request(context)
            wanted = context.get_user_input()
            if request is not None:
                example.set_decision(context, wanted, f"asked for {wanted}")
            answer = Message(role=Role.ROLE_AGENT, message_id="a1", parts=[Part(text="done")])
            await event_queue.enqueue_event(answer)

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            raise NotImplementedError

    def never(request: dict[str, Any], asked: str, answered: str) -> None:
        raise AssertionError("decide is not called when the executor decided")

    app = example.routing_app(example.RoutingExecutor(Deciding(), never), example.demo_card("http://x"))

    def ask(server: ServerThread, text: str) -> dict[str, Any]:
        data = {"agentCards": [{"id": "billing", "name": "Billing"}], "sender": "user"}
        message: dict[str, Any] = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": text}]}
        message |= {"extensions": [URI], "metadata": {URI: data}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
        headers = {"A2A-Version": "1.0", "A2A-Extensions": URI}
        reply: dict[str, Any] = httpx.post(f"{server.url}/", json=body, headers=headers, timeout=10).json()
        answer: dict[str, Any] = reply["result"]["message"]
        return answer

    with ServerThread(app, name="deciding") as server:
        chosen, stranger = ask(server, "billing"), ask(server, "ghost")
    assert chosen["metadata"][URI] == {"recipient": "billing", "reason": "asked for billing"}
    assert chosen["extensions"] == [URI]
    assert URI not in stranger.get("metadata", {}) and not stranger.get("extensions")


@pytest.mark.parametrize("module", ["a2a_sdk", "adk", "openai_agents"])
def test_each_adapter_stands_alone_without_ranch(module: str) -> None:
    """Users copy one file: it imports neither ranch nor a sibling (the venvs that run the ADK and
    Agents SDK examples have no ranch at all)."""
    imported: set[str] = set()
    for node in ast.walk(ast.parse((EXAMPLES / f"{module}.py").read_text())):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert not imported & {"ranch", "_support", "a2a_sdk", "adk", "openai_agents"}, imported
