"""`ranch conform URL` against real agents on 127.0.0.1 (issue 36, item 2).

One ranch serves a team of rules agents, a `kind: python` router written with ranch's API, and an
echo agent that does not declare the extension; a2a-sdk servers are a router written to the spec
(tests/_support/conform_routers.py), the suite's fixed-answer `router` peer and a `plain` peer. Each
gets the pass/fail table its behaviour earns, and the command's exit code says so (0, 1, 2).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest

from _support.conform_routers import serve_sdk_router
from _support.hubkit import ADMIN_KEY, serve_ranch, wait_until
from _support.jsnode import JS, needs
from _support.peers import running_peer
from _support.servers import free_port
from ranch.cli import main
from ranch.conform import Report, run
from ranch.conform.scenarios import BILLING, MAPS, request
from ranch.wire import routing_schema

CONFIG = """
agents:
  - id: clerk
    kind: rules
    rules:
      - {match: "back to whoever sent it", reply: "Returning it.", route: sender, reason: work done}
      - {match: "(?i)billing", reply: "Over to billing.", route: conform-billing, reason: an invoice}
      - {reply: "Noted.", route: user, reason: answered}
  - {id: reference, kind: python, entry: "_support.conform_routers:RanchRouter", client_routing: true}
  - {id: parrot, kind: echo}
  - {id: conform-billing, kind: echo}  # the kit's peers, defined here so the clerk's rules may name them
  - {id: conform-maps, kind: echo}
teams:
  - {id: desk, members: [clerk], default_agent: clerk}
"""

ALL = ["declares", "valid-recipient", "reads-peers", "back-to-sender", "hops-remaining", "not-negotiated"]


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serve_ranch(CONFIG, tmp_path_factory.mktemp("conform") / "r.db", auth="keys") as served:
        yield f"{served.url}/a2a/agents"


def conform(url: str, key: str | None = None) -> Report:
    return anyio.run(lambda: run(url, key=key, answer_within=10))


def verdicts(report: Report) -> dict[str, bool | None]:
    return {outcome.id: outcome.passed for outcome in report.outcomes}


def test_the_request_data_the_kit_sends_is_what_the_schema_describes() -> None:
    for data in (request([BILLING, MAPS]), request([MAPS], sender=MAPS["id"], hops=1)):
        assert routing_schema.errors("request", data) == []


def test_a_ranch_python_router_passes_every_scenario(hub: str) -> None:
    report = conform(f"{hub}/reference", ADMIN_KEY)
    assert verdicts(report) == dict.fromkeys(ALL, True), report.to_json()


def test_an_sdk_router_written_to_the_spec_passes_every_scenario() -> None:
    with serve_sdk_router() as url:
        report = conform(url)
    assert verdicts(report) == dict.fromkeys(ALL, True), report.to_json()


def test_a_ranch_team_of_rules_agents_passes_every_scenario(hub: str) -> None:
    """The team reads its caller's peers (a member naming one ends the turn with it; one not offered
    is no decision) and sends `sender` outward. Its rules agent cannot see hopsRemaining and still
    names billing on the caller's last hop: the team answers `user` instead, saying why."""
    report = conform(f"{hub}/desk", ADMIN_KEY)
    assert verdicts(report) == dict.fromkeys(ALL, True), report.to_json()
    [last] = [o for o in report.outcomes if o.id == "hops-remaining"]
    assert "answered user" in last.detail and "the caller has no hop left" in last.detail, last.detail


def test_a_fixed_answer_sdk_peer_fails_the_scenarios_that_need_the_peers_read() -> None:
    """The suite's `router` peer always answers `user`: valid, but it never picks billing nor goes back."""
    with running_peer("router", route_to="user", reason="always") as peer:
        report = conform(peer.url)
    assert verdicts(report) == {
        **dict.fromkeys(ALL, True),
        "reads-peers": False,
        "back-to-sender": False,
    }, report.to_json()
    [reads] = [o for o in report.outcomes if o.id == "reads-peers"]
    assert reads.detail == "with conform-billing offered for an invoice, it answered user (always)"


def test_malformed_routing_data_fails_with_the_schema_location() -> None:
    with running_peer("router", route_to=42) as peer:
        report = conform(peer.url)
    [valid] = [o for o in report.outcomes if o.id == "valid-recipient"]
    assert valid.passed is False
    assert (
        "recipient is 42, not a string (ignored; schema.json#/$defs/response/properties/recipient/anyOf)"
        in (valid.detail)
    )


def test_the_command_prints_the_table_and_exits_0_1_or_2(
    hub: str, capsys: pytest.CaptureFixture[str]
) -> None:
    def exit_code(*argv: str) -> int:
        with pytest.raises(SystemExit) as stopped:
            main(["conform", *argv, "--timeout", "10"])
        return int(stopped.value.code or 0)

    assert exit_code(f"{hub}/reference", "--key", ADMIN_KEY) == 0
    table = capsys.readouterr().out
    assert "  hops-remaining   pass  answered user (no hop left for anyone else)" in table
    assert table.rstrip().endswith("6 of 6 scenarios passed")

    assert (
        exit_code(f"{hub}/parrot", "--json", "--key", ADMIN_KEY) == 1
    )  # an echo agent declares nothing: the rest is skipped
    printed = json.loads(capsys.readouterr().out)
    assert printed["passed"] is False
    assert [(s["id"], s["passed"]) for s in printed["scenarios"]] == [("declares", False)] + [
        (scenario, None) for scenario in ALL[1:]
    ]

    assert exit_code(f"{hub}/nobody") == 2
    assert "cannot read the card" in capsys.readouterr().err


def test_an_agent_that_refuses_the_kit_cannot_be_tested(hub: str, capsys: pytest.CaptureFixture[str]) -> None:
    """No key for a guarded agent: exit 2, naming the refusal (not six failures of the agent's)."""
    with pytest.raises(SystemExit) as stopped:
        main(["conform", f"{hub}/reference"])
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert "refused the kit's request (HTTP 401)" in said and "give its key with --key" in said


def test_a_plain_sdk_peer_is_told_it_declares_nothing() -> None:
    with running_peer("plain") as peer:
        report = conform(peer.url)
    assert verdicts(report)["declares"] is False and not report.passed


def _card_served(url: str) -> bool:
    try:
        return httpx.get(f"{url}/.well-known/agent-card.json", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@needs("@a2a-js/sdk")
def test_a_js_sdk_router_written_to_the_spec_passes_every_scenario(tmp_path: Path) -> None:
    """tests/conform/js_router.mjs on the @a2a-js/sdk server stack, run beside bench/js's node_modules."""
    shutil.copy(Path(__file__).with_name("js_router.mjs"), tmp_path / "js_router.mjs")
    (tmp_path / "node_modules").symlink_to(JS / "node_modules")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    node = subprocess.Popen(
        ["node", str(tmp_path / "js_router.mjs"), str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        wait_until(lambda: _card_served(url) or node.poll() is not None, timeout=15, what="the js router")
        assert node.poll() is None, node.stdout.read().decode() if node.stdout else ""
        report = conform(url)
    finally:
        node.terminate()
        node.communicate(timeout=10)
    assert verdicts(report) == dict.fromkeys(ALL, True), report.to_json()
