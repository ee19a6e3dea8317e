"""Push notifications and the SSRF guard, against a real webhook receiver on 127.0.0.1."""

from __future__ import annotations

import gc
import ipaddress
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import AuthenticationInfo, TaskPushNotificationConfig
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from _support.hubkit import serve_ranch, wait_until
from _support.sdk import as_json, user_message
from _support.servers import ServerThread
from ranch.exceptions import UnsafeUrl
from ranch.policy.ssrf import UrlGuard, refusal
from ranch.tasks.push import TOKEN_HEADER, Backoff, PushSender, webhook_client

# -- the guard, address by address ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("127.8.9.10", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("172.16.5.4", "private"),
        ("192.168.1.1", "private"),
        ("fd12:3456::1", "private"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("169.254.169.254", "metadata"),
        ("fd00:ec2::254", "metadata"),
        ("100.64.0.1", "CGNAT"),
        ("224.0.0.1", "multicast"),
        ("ff02::1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),
        ("::ffff:10.1.2.3", "private"),
        ("::ffff:169.254.169.254", "metadata"),
        ("64:ff9b::a9fe:a9fe", "metadata"),
        ("240.0.0.1", "reserved"),
        ("93.184.216.34", None),
        ("2606:4700::1111", None),
    ],
)
def test_refusal_by_address(address: str, reason: str | None) -> None:
    found = refusal(ipaddress.ip_address(address))
    assert (found is None) if reason is None else (found is not None and reason in found), found


def _resolver(answers: dict[str, Sequence[str]]) -> Any:
    async def resolve(host: str, port: int) -> Sequence[str]:
        if host not in answers:
            raise OSError(f"unknown host {host}")
        return answers[host]

    return resolve


@pytest.mark.anyio
async def test_every_resolved_address_is_checked_and_the_request_is_pinned() -> None:
    guard = UrlGuard(
        resolver=_resolver(
            {"hooks.example": ["93.184.216.34"], "mixed.example": ["93.184.216.34", "10.0.0.7"]}
        )
    )
    target = await guard.check("https://hooks.example:8443/a?b=1")
    assert (target.host, target.addresses) == ("hooks.example", (ipaddress.ip_address("93.184.216.34"),))
    with pytest.raises(UnsafeUrl, match="mixed.example resolves to 10.0.0.7, a private address"):
        await guard.check("http://mixed.example/")
    with pytest.raises(UnsafeUrl, match="does not resolve"):
        await guard.check("http://nowhere.example/")
    for url, why in [
        ("ftp://hooks.example/", "http and https"),
        ("http://u:p@hooks.example/", "credentials"),
        ("http:///x", "no host"),
    ]:
        with pytest.raises(UnsafeUrl, match=why):
            await guard.check(url)


@pytest.mark.anyio
async def test_a_name_resolving_to_loopback_and_the_switch() -> None:
    with pytest.raises(UnsafeUrl, match="localhost resolves to 127.0.0.1, a loopback address"):
        await UrlGuard().check("http://localhost:9/hook")
    with pytest.raises(UnsafeUrl, match="loopback"):
        await UrlGuard().check("http://[::ffff:127.0.0.1]:9/hook")
    allowed = UrlGuard(allow_loopback=True)
    assert (await allowed.check("http://localhost:9/hook")).host == "localhost"
    await allowed.check("http://10.0.0.1/hook")
    with pytest.raises(UnsafeUrl, match="metadata"):  # never, whatever the switch
        await allowed.check("http://169.254.169.254/latest/meta-data/")
    with pytest.raises(UnsafeUrl, match="link-local"):
        await allowed.check("http://[fe80::1]/")


# -- a real receiver --------------------------------------------------------------------------------


@dataclass
class Receiver:
    url: str
    hits: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    failures_left: int = 0

    def on(self, path: str) -> list[tuple[dict[str, str], Any]]:
        return [(headers, body) for where, headers, body in self.hits if where == path]


@pytest.fixture(scope="module")
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")

    async def record(request: Request) -> Response:
        state.hits.append((request.url.path, dict(request.headers), await request.json()))
        if request.url.path == "/flaky" and state.failures_left > 0:
            state.failures_left -= 1
            return Response(status_code=503)
        return JSONResponse({"ok": True})

    async def redirect(request: Request) -> Response:
        state.hits.append((request.url.path, dict(request.headers), None))
        target = "/trap" if request.url.path == "/redirect" else "http://169.254.169.254/latest/meta-data/"
        return RedirectResponse(target, status_code=307)

    app = Starlette(
        routes=[
            Route("/hook", record, methods=["POST"]),
            Route("/flaky", record, methods=["POST"]),
            Route("/trap", record, methods=["POST"]),
            Route("/redirect", redirect, methods=["POST"]),
            Route("/to-metadata", redirect, methods=["POST"]),
        ]
    )
    with ServerThread(app, name="webhooks") as server:
        state.url = server.url
        yield state


def _config(url: str, token: str = "tok-123", **fields: Any) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(id="c1", task_id="t1", url=url, token=token, **fields)


FAST = Backoff(attempts=3, first=0.01, longest=0.05)


@pytest.mark.anyio
async def test_sender_delivers_with_token_and_retries(receiver: Receiver) -> None:
    async with webhook_client(UrlGuard(allow_loopback=True)) as client:
        sender = PushSender(client, FAST)
        auth = AuthenticationInfo(scheme="Bearer", credentials="sekret")
        done = await sender.deliver(_config(f"{receiver.url}/hook", authentication=auth), b'{"n": 1}')
        assert done.ok and done.attempts == 1
        headers, body = receiver.on("/hook")[-1]
        assert headers[TOKEN_HEADER.lower()] == "tok-123" and headers["authorization"] == "Bearer sekret"
        assert body == {"n": 1}
        receiver.failures_left = 2
        flaky = await sender.deliver(_config(f"{receiver.url}/flaky"), b"{}")
        assert flaky.ok and flaky.attempts == 3, flaky
        receiver.failures_left = 5
        gave_up = await sender.deliver(_config(f"{receiver.url}/flaky"), b"{}")
        assert not gave_up.ok and gave_up.attempts == 3 and gave_up.status == 503  # bounded
        receiver.failures_left = 0


@pytest.mark.anyio
async def test_redirects_are_not_followed(receiver: Receiver) -> None:
    async with webhook_client(UrlGuard(allow_loopback=True)) as client:
        sender = PushSender(client, FAST)
        to_trap = await sender.deliver(_config(f"{receiver.url}/redirect"), b"{}")
        to_metadata = await sender.deliver(_config(f"{receiver.url}/to-metadata"), b"{}")
    assert not to_trap.ok and to_trap.attempts == 1 and "not followed" in to_trap.error
    assert not to_metadata.ok and "169.254.169.254" in to_metadata.error
    assert receiver.on("/trap") == [] and len(receiver.on("/redirect")) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::ffff:127.0.0.1]"])
async def test_without_the_switch_loopback_receivers_are_never_called(receiver: Receiver, host: str) -> None:
    before = len(receiver.hits)
    port = receiver.url.rsplit(":", 1)[1]
    async with webhook_client(UrlGuard()) as client:
        refused = await PushSender(client, FAST).deliver(_config(f"http://{host}:{port}/hook"), b"{}")
    assert not refused.ok and "loopback" in refused.error and refused.attempts == 1  # never retried
    assert len(receiver.hits) == before


# -- ranch serving push configs and delivering task updates ----------------------------------------

CONFIG = """
agents:
  - id: steady
    kind: python
    entry: _support.probes:Probe
    client_routing: true
    options: {sleep: 0.3, reply: "steady saw: {text}", route: user, reason: answered}
  - {id: echo, kind: echo}
teams:
  - id: relay
    members: [steady]
    default_agent: steady
"""


def _rpc(http: httpx.Client, url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer: dict[str, Any] = http.post(url, json=body, headers={"A2A-Version": "1.0"}).json()
    return answer


def _states(receiver: Receiver, path: str, task_id: str) -> list[str]:
    states = []
    for _, body in receiver.on(path):
        for kind in ("task", "statusUpdate"):
            item = body.get(kind)
            if item and (item.get("id") == task_id or item.get("taskId") == task_id):
                states.append(item["status"]["state"])
    return states


def test_push_configs_and_deliveries_over_json_rpc(tmp_path: Path, receiver: Receiver) -> None:
    hook = f"{receiver.url}/hook"
    with (
        serve_ranch(CONFIG, tmp_path / "t.db", allow_loopback_webhooks=True) as ranch,
        httpx.Client(timeout=10) as http,
    ):
        url = ranch.agent_url("relay")
        card = http.get(f"{url}/.well-known/agent-card.json").json()
        assert card["capabilities"]["pushNotifications"] is True
        inline = {"url": hook, "token": "inline-token", "id": "mine"}
        sent = _rpc(
            http,
            url,
            "SendMessage",
            {
                "message": as_json(user_message()),
                "configuration": {"returnImmediately": True, "taskPushNotificationConfig": inline},
            },
        )
        task_id = sent["result"]["task"]["id"]
        wait_until(lambda: "TASK_STATE_COMPLETED" in _states(receiver, "/hook", task_id))
        states = _states(receiver, "/hook", task_id)
        assert states[0] == "TASK_STATE_SUBMITTED" and states[-1] == "TASK_STATE_COMPLETED", states
        tokens = {h[TOKEN_HEADER.lower()] for h, b in receiver.on("/hook") if task_id in str(b)}
        assert tokens == {"inline-token"}

        listed = _rpc(http, url, "ListTaskPushNotificationConfigs", {"taskId": task_id})["result"]
        assert [c["id"] for c in listed["configs"]] == ["mine"]
        created = _rpc(
            http,
            url,
            "CreateTaskPushNotificationConfig",
            {"taskId": task_id, "url": hook, "id": "second", "token": "t2"},
        )
        assert created["result"]["id"] == "second", created
        got = _rpc(http, url, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "second"})
        assert got["result"]["url"] == hook
        assert "result" in _rpc(
            http, url, "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "second"}
        )
        missing = _rpc(http, url, "GetTaskPushNotificationConfig", {"taskId": task_id, "id": "second"})
        assert missing["error"]["code"] == -32001
        unknown = _rpc(http, url, "ListTaskPushNotificationConfigs", {"taskId": "nope"})
        assert unknown["error"]["code"] == -32001

        # the HTTP+JSON binding: a config for a running task hears the rest of it
        started = http.post(
            f"{url}/message:send",
            json={"message": as_json(user_message()), "configuration": {"returnImmediately": True}},
            headers={"A2A-Version": "1.0"},
        ).json()
        rest_task = started["task"]["id"]
        made = http.post(
            f"{url}/tasks/{rest_task}/pushNotificationConfigs",
            json={"url": hook, "token": "rest-token", "id": "r"},
            headers={"A2A-Version": "1.0"},
        )
        assert made.status_code == 200, made.text
        wait_until(lambda: "TASK_STATE_COMPLETED" in _states(receiver, "/hook", rest_task))


def test_unsafe_webhooks_are_refused_when_the_switch_is_off(tmp_path: Path, receiver: Receiver) -> None:
    port = receiver.url.rsplit(":", 1)[1]
    before = len(receiver.hits)
    with serve_ranch(CONFIG, tmp_path / "t.db") as ranch, httpx.Client(timeout=10) as http:
        url = ranch.agent_url("relay")
        task_id = _rpc(
            http,
            url,
            "SendMessage",
            {"message": as_json(user_message()), "configuration": {"returnImmediately": True}},
        )["result"]["task"]["id"]
        for target in [
            f"http://127.0.0.1:{port}/hook",
            f"http://localhost:{port}/hook",
            f"http://[::ffff:127.0.0.1]:{port}/hook",
            "http://10.0.0.8/hook",
            "http://169.254.169.254/latest/meta-data/",
        ]:
            refused = _rpc(http, url, "CreateTaskPushNotificationConfig", {"taskId": task_id, "url": target})
            error = refused["error"]
            assert error["code"] == -32602, refused
            assert error["data"][0]["reason"] == "UNSAFE_URL" and "refusing to call" in error["message"], (
                error
            )
        inline = _rpc(
            http,
            url,
            "SendMessage",
            {
                "message": as_json(user_message()),
                "configuration": {"taskPushNotificationConfig": {"url": f"http://localhost:{port}/hook"}},
            },
        )
        assert inline["error"]["code"] == -32602, inline
        rest = http.post(
            f"{url}/tasks/{task_id}/pushNotificationConfigs",
            json={"url": f"http://127.0.0.1:{port}/hook"},
            headers={"A2A-Version": "1.0"},
        )
        assert rest.status_code == 400 and rest.json()["error"]["details"][0]["reason"] == "UNSAFE_URL"
    assert len(receiver.hits) == before


def test_a_hub_stopped_while_a_run_with_a_webhook_is_working_leaves_nothing_open(
    tmp_path: Path, receiver: Receiver
) -> None:
    """The run is cancelled with the hub: its webhook queue is closed all the same (it was left open,
    and its worker waiting, when the hub stopped mid-run; the unclosed stream surfaced later as a
    ResourceWarning in whatever test the garbage collector ran in)."""
    hook = f"{receiver.url}/hook"
    with (
        serve_ranch(CONFIG, tmp_path / "t.db", allow_loopback_webhooks=True) as ranch,
        httpx.Client(timeout=10) as http,
    ):
        configuration = {"returnImmediately": True, "taskPushNotificationConfig": {"url": hook}}
        sent = _rpc(
            http,
            ranch.agent_url("steady"),  # answers after 0.3 s: still working when the hub stops
            "SendMessage",
            {"message": as_json(user_message()), "configuration": configuration},
        )
        task_id = sent["result"]["task"]["id"]
        wait_until(lambda: _states(receiver, "/hook", task_id) == ["TASK_STATE_SUBMITTED"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)] == []
