"""`GET /metrics` (`--metrics`): Prometheus text, read after a known sequence of calls; behind an
owner's or admin's key with `--auth keys`; summed over the workers of `ranch serve --workers 2`.

prometheus-client's registry is one per process, so each test reads what its own calls added.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from _support.hubkit import ADMIN_KEY, Api, serve_ranch, wait_until
from _support.servers import ServerProcess, ServerThread, free_port
from ranch.observe import metrics

TEAM = """
agents:
  - id: desk
    kind: rules
    rules:
      - {match: "^done", reply: "all done: {text}", route: user, reason: finished}
      - {reply: "please look: {text}", route: helper, reason: needs the helper}
  - id: helper
    kind: rules
    rules: [{reply: "done {text}", route: desk, reason: back to the desk}]
  - {id: echo, kind: echo}
teams:
  - {id: office, members: [desk, helper], default_agent: desk}
"""
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(autouse=True)
def metrics_off_after() -> Iterator[None]:
    yield
    metrics.disable()


def scrape(url: str, key: str | None = None) -> Samples:
    answer = httpx.get(f"{url}/metrics", headers={"X-API-Key": key} if key else {}, timeout=10)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def send(url: str, text: str) -> httpx.Response:
    message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return httpx.post(url, json=body, headers={"A2A-Version": "1.0"}, timeout=30)


def test_metrics_count_requests_turns_hops_and_errors(tmp_path: Path) -> None:
    with serve_ranch(TEAM, tmp_path / "m.db", metrics=True) as hub:
        before = scrape(hub.url)
        for _ in range(2):
            assert send(hub.agent_url("office"), "the report").status_code == 200
        assert send(hub.agent_url("echo"), "hi").status_code == 200
        assert send(hub.agent_url("nobody"), "hi").status_code == 404  # no such agent
        after = scrape(hub.url)

    def delta(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("ranch_requests_total", entry="a2a", method="POST", status="200") == 3
    assert delta("ranch_requests_total", entry="a2a", method="POST", status="404") == 1
    assert delta("ranch_turn_hops_count", team="office") == 2
    assert delta("ranch_turn_hops_sum", team="office") == 6  # desk -> helper -> desk, twice
    assert delta("ranch_turn_seconds_count", team="office") == 2
    assert delta("ranch_hop_seconds_count", team="office", agent="desk") == 4
    assert delta("ranch_hop_seconds_count", team="office", agent="helper") == 2
    assert delta("ranch_errors_total", type="AgentNotFound") == 1
    assert value(after, "ranch_runs_in_flight") == 0  # every run ended
    assert delta("ranch_commit_batch_rows_count") >= 1  # the team's tasks were stored in group commits


def test_rate_limit_rejections_are_counted(tmp_path: Path) -> None:
    with serve_ranch(TEAM, tmp_path / "m.db", metrics=True, caller_rate=0.001, caller_burst=1) as hub:
        before = scrape(hub.url)
        statuses = [send(hub.agent_url("echo"), "hi").status_code for _ in range(3)]
        after = scrape(hub.url)
    assert statuses == [200, 429, 429]
    rejected = value(after, "ranch_rate_limited_total", bucket="caller")
    assert rejected - value(before, "ranch_rate_limited_total", bucket="caller") == 2


def test_metrics_need_the_superusers_key_with_auth_keys(tmp_path: Path) -> None:
    with serve_ranch(TEAM, tmp_path / "m.db", metrics=True, auth="keys") as hub:
        assert httpx.get(f"{hub.url}/metrics", timeout=10).status_code == 401
        admin = Api(hub.url, ADMIN_KEY)
        member = admin.post("/users", {"name": "Mia", "role": "member"})["api_key"]
        assert httpx.get(f"{hub.url}/metrics", headers={"X-API-Key": member}, timeout=10).status_code == 403
        owner = admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]  # a tenant's owner
        assert httpx.get(f"{hub.url}/metrics", headers={"X-API-Key": owner}, timeout=10).status_code == 403
        assert "ranch_requests_total" in str(scrape(hub.url, ADMIN_KEY))


def test_invented_http_methods_make_no_new_series(tmp_path: Path) -> None:
    with serve_ranch(TEAM, tmp_path / "m.db", metrics=True) as hub:
        for method in ("BREW", "WHEN", "PROPFIND"):
            httpx.request(method, f"{hub.url}/healthz", timeout=10)
        samples = scrape(hub.url)
    methods = {dict(labels).get("method") for name, labels in samples if name == "ranch_requests_total"}
    assert "_OTHER" in methods and not methods & {"BREW", "WHEN", "PROPFIND"}


def test_no_metrics_route_without_the_flag(tmp_path: Path) -> None:
    with serve_ranch(TEAM, tmp_path / "m.db") as hub:
        assert httpx.get(f"{hub.url}/metrics", timeout=10).status_code == 404


def test_workers_report_one_sum(tmp_path: Path) -> None:
    """Two workers (Redis at 127.0.0.1:6379 is needed): whichever answers /metrics counts every request."""
    config = tmp_path / "team.yaml"
    config.write_text(TEAM)
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port), "--workers", "2"]
    command += ["--metrics", "--db", f"sqlite+aiosqlite:///{tmp_path / 'w.db'}", "--caller-rate", "off"]
    command += [
        "--redis-url",
        "redis://127.0.0.1:6379/0",
        "--redis-prefix",
        f"ranch-test-{uuid.uuid4().hex[:8]}",
    ]
    env = {"PATH": "/usr/bin:/bin", "PROMETHEUS_MULTIPROC_DIR": str(tmp_path / "prom")}
    (tmp_path / "prom").mkdir()
    with ServerProcess(command, port, env=env, log_path=tmp_path / "serve.log") as server:
        wait_until(lambda: server.output().count("Application startup complete") == 2, timeout=60)
        sent = 0
        while len(counting(tmp_path / "prom")) < 2 and sent < 200:  # new connections, until both took some
            with httpx.Client() as client:
                message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "x"}]}
                body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
                client.post(f"{server.url}/a2a/agents/echo", json=body, headers={"A2A-Version": "1.0"})
            sent += 1
        assert len(counting(tmp_path / "prom")) == 2, f"one worker took all {sent} connections"
        seen = {value(scrape(server.url), "ranch_requests_total", entry="a2a", method="POST", status="200")
                for _ in range(6)}  # fmt: skip
    assert seen == {float(sent)}  # the same total from whichever worker answered


def counting(folder: Path) -> list[str]:
    """The processes whose sample files count A2A requests."""
    return [
        path.name
        for path in folder.glob("counter_*.db")
        if any(key.startswith('["ranch_requests"') and number > 0
               for key, number, *_ in MmapedDict.read_all_values_from_file(str(path)))  # type: ignore[no-untyped-call]
    ]  # fmt: skip


WORKER = """
agents:
  - {id: worker, kind: python, entry: "_support.probes:Probe", options: {sleep: 0.1, reply: "done: {text}"}}
"""


def test_push_attempts_and_failures_are_counted(tmp_path: Path) -> None:
    async def ok(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def gone(request: Request) -> Response:
        return Response(status_code=404)  # not retried: the update is given up at once

    hooks = Starlette(routes=[Route("/ok", ok, methods=["POST"]), Route("/gone", gone, methods=["POST"])])
    with (
        ServerThread(hooks, name="webhooks") as receiver,
        serve_ranch(WORKER, tmp_path / "m.db", metrics=True, allow_loopback_webhooks=True) as hub,
    ):
        before = scrape(hub.url)
        for path in ("/ok", "/gone"):
            message = {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "x"}]}
            config = {"returnImmediately": True, "taskPushNotificationConfig": {"url": receiver.url + path}}
            body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                    "params": {"message": message, "configuration": config}}  # fmt: skip
            answer = httpx.post(
                hub.agent_url("worker"), json=body, headers={"A2A-Version": "1.0"}, timeout=10
            )
            assert "result" in answer.json(), answer.text

        def counted() -> Samples | None:
            now = scrape(hub.url)
            failed = value(now, "ranch_push_failures_total") - value(before, "ranch_push_failures_total")
            tried = value(now, "ranch_push_attempts_total") - value(before, "ranch_push_attempts_total")
            return now if failed >= 1 and tried > failed else None  # the good webhook's too

        after = wait_until(counted, what="both webhooks' pushes counted")
    attempts = value(after, "ranch_push_attempts_total") - value(before, "ranch_push_attempts_total")
    failed = value(after, "ranch_push_failures_total") - value(before, "ranch_push_failures_total")
    assert attempts >= failed + 1  # the good webhook's deliveries are attempts, not failures
