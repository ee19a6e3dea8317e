"""A misbehaving A2A peer and an "internal service" that counts who reached it.

The peer serves one agent per mode at /{mode} (its card at /{mode}/.well-known/agent-card.json):

- ``ok``: a valid card; every message gets "ok from faulty".
- ``echoall``: answers "ECHOALL: " and every text part it received.
- ``slowcard``: the card endpoint does not answer until the peer is stopped.
- ``cardkbN``: a valid card whose description is N KB; ``hugecard``: a card body streamed
  without end (bounded here at 64 MB), which nobody should read to the end.
- ``ssrfcard``: a valid card whose interface URL is the internal service.
- ``flipcard``: like ``ok`` until ``Faulty.flipped`` is set, then like ``ssrfcard``.
- ``bigreplyN``: answers with N KB of text (``bigreply``: 60 MB, the size that was once accepted).
- ``/redir307/{rest}``: answers 307 to the internal service's /internal/{rest}.

The failures a remote member can show on a call (the audit's fault matrix):

- ``slow``: answers only when the peer is stopped; ``http500``: HTTP 500; ``garbage``: bytes
  that are not JSON; ``garbage_json``: JSON that is not JSON-RPC; ``rpcerror``: a JSON-RPC error.
- Streaming modes (their cards advertise streaming, so callers use SendStreamingMessage):
  ``endless`` (artifact chunks without end), ``endless_working`` (WORKING updates without end),
  ``endless_ping`` (SSE comments only), ``midclose`` (a WORKING task, then the connection drops),
  ``midclose_partial`` (half an event, then the connection drops), ``sse_garbage`` (an event
  whose data is not JSON). `open_streams` counts the streams still being written.
- ``redircard``: the card endpoint answers 307 to the internal service.

Members that answer well but report what they cost in numbers JSON has no room for (Python's
JSON reader takes ``NaN`` and ``Infinity``): ``usage_nan``, ``usage_inf``, ``usage_text`` (a
string) report them as their `usage` in a message; ``trail_nan`` is a team's completed task whose
`usage` and nested trail hold ``NaN``. Each answers "spent". ``nan_data``,
``inf_part_metadata`` and ``nan_metadata`` answer "odd" with such numbers in a data part, a
part's metadata or the message's metadata (`NON_FINITE_MODES`).

The internal service (`Internal`) answers every request, as an A2A agent would, with "reached
the internal service" and records it: a test asserts that nothing reached it. A path ending in
``.png`` gets `SECRET_PNG` (an image an internal store would hold), one under ``/forbidden/`` a 403.

`not_http` is a port that accepts connections and closes them without a word (a database, say).
`serve_relaying` serves a hub whose teams hand a message to one of the peer's agents and back.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import AsyncIterator, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from _support.hubkit import RunningRanch, serve_ranch
from _support.servers import ServerThread, bind_socket

HUGE_CARD_BYTES = 64 * 1024 * 1024
STREAMING_MODES = frozenset(
    {"endless", "endless_working", "endless_ping", "midclose", "midclose_partial", "sse_garbage"}
)
FAULT_MODES = (
    "slow",
    "garbage",
    "garbage_json",
    "http500",
    "rpcerror",
    "redircard",
    *sorted(STREAMING_MODES),
)
USAGE_MODES = {
    "usage_nan": '{"usage": {"totalTokens": NaN}}',
    "usage_inf": '{"usage": {"totalTokens": Infinity, "inputTokens": -Infinity, "outputTokens": 1e999}}',
    "usage_text": '{"usage": {"totalTokens": "lots", "inputTokens": [1]}}',
    "trail_nan": '{"usage": {"inputTokens": NaN, "outputTokens": 2}, '
    '"trail": [{"agent": "inner", "hop": NaN, "tokens": Infinity, "reason": "r"}]}',
}
"""Mode -> the client-routing metadata (raw JSON) its answer carries."""
NON_FINITE_MODES = {
    "nan_data": ('[{"text": "odd"}, {"data": {"score": NaN, "range": [1, Infinity]}}]', None),
    "inf_part_metadata": ('[{"text": "odd", "metadata": {"weight": -Infinity}}]', None),
    "nan_metadata": ('[{"text": "odd"}]', '{"confidence": NaN, "nested": {"max": Infinity}}'),
}
"""Mode -> (parts, message metadata), raw JSON holding numbers JSON has no room for; each answers "odd"."""
CLIENT_ROUTING = "https://ranch.woi.dev/extensions/client-routing/v1"
PACE = 0.05
"""Seconds between two events of an endless stream."""
SECRET_PNG = b"\x89PNG\r\n\x1a\nSECRET-INTERNAL-BYTES"


class PeerDropped(Exception):
    """Raised inside a streamed body so that the server drops the connection mid-response."""


@dataclass
class Internal:
    """A service that must never be reached; `hits` lists (method, path) of what reached it."""

    url: str = ""
    hits: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def app(self) -> Starlette:
        async def internal(request: Request) -> Response:
            body = await request.body()
            with self._lock:
                self.hits.append((request.method, request.url.path))
            if request.url.path.startswith("/forbidden/"):
                return Response("no", status_code=403)
            if request.url.path.endswith(".png"):
                return Response(SECRET_PNG, media_type="image/png")
            rid = json.loads(body).get("id") if body.startswith(b"{") else None
            reply = {
                "jsonrpc": "2.0",
                "id": rid,
                "result": {"message": _message("reached the internal service")},
            }
            return JSONResponse(reply)

        return Starlette(routes=[Route("/{rest:path}", internal, methods=["GET", "POST"])])


@dataclass
class Faulty:
    """The misbehaving peer; `internal` is where its ssrf modes point."""

    internal: Internal
    url: str = ""
    port: int = 0
    flipped: bool = False
    stopping: threading.Event = field(default_factory=threading.Event)
    card_requests: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)
    """JSON-RPC requests per mode, counted as they arrive (before any answer)."""
    open_streams: int = 0

    def card(self, mode: str, interface: str | None = None) -> dict[str, Any]:
        return {
            "name": f"faulty-{mode}",
            "description": "",
            "version": "1.0",
            "supportedInterfaces": [
                {
                    "url": interface or f"{self.url}/{mode}",
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                }
            ],
            "capabilities": {"streaming": mode in STREAMING_MODES},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [],
        }

    def app(self) -> Starlette:
        async def card_endpoint(request: Request) -> Response:
            mode = request.path_params["mode"]
            self.card_requests[mode] = self.card_requests.get(mode, 0) + 1
            if mode == "slowcard":
                await self._wait_until_stopped()
            if mode == "redircard":
                return RedirectResponse(f"{self.internal.url}/internal/card", 307)
            if mode == "hugecard":
                return StreamingResponse(_endless_card(), media_type="application/json")
            if mode.startswith("cardkb"):
                card = self.card(mode)
                card["description"] = "A" * int(mode.removeprefix("cardkb")) * 1000
                return JSONResponse(card)
            if mode == "ssrfcard" or (mode == "flipcard" and self.flipped):
                return JSONResponse(self.card(mode, f"{self.internal.url}/internal"))
            return JSONResponse(self.card(mode))

        async def rpc(request: Request) -> Response:
            mode, body = request.path_params["mode"], json.loads(await request.body())
            self.calls[mode] = self.calls.get(mode, 0) + 1
            failure = await self._failure(mode, body)
            if failure is not None:
                return failure
            if mode in USAGE_MODES:
                return Response(_costly(mode, body.get("id")), media_type="application/json")
            if mode in NON_FINITE_MODES:
                return Response(_non_finite(mode, body.get("id")), media_type="application/json")
            if mode == "echoall":
                parts = body["params"]["message"]["parts"]
                text = "ECHOALL: " + " || ".join(p.get("text", "") for p in parts)
            elif mode.startswith("bigreply"):
                kilobytes = int(mode.removeprefix("bigreply") or 60 * 1024)
                text = "B" * kilobytes * 1024
            else:
                text = "ok from faulty"
            return JSONResponse(
                {"jsonrpc": "2.0", "id": body.get("id"), "result": {"message": _message(text)}}
            )

        async def redirect(request: Request) -> Response:
            return RedirectResponse(f"{self.internal.url}/internal/{request.path_params['rest']}", 307)

        return Starlette(
            routes=[
                Route("/redir307/{rest:path}", redirect, methods=["GET", "POST"]),
                Route("/{mode}/.well-known/agent-card.json", card_endpoint),
                Route("/{mode}", rpc, methods=["POST"]),
            ]
        )

    async def _failure(self, mode: str, body: dict[str, Any]) -> Response | None:
        """The answer of a failing mode (None for the others)."""
        if body.get("method") == "CancelTask":
            error = {"code": -32002, "message": "this task cannot be canceled"}
            return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "error": error})
        if mode == "slow":
            await self._wait_until_stopped()
        elif mode == "http500":
            return Response("internal error", status_code=500)
        elif mode == "garbage":
            return Response(b"\x00\xffthis is not json", media_type="application/json")
        elif mode == "garbage_json":
            return JSONResponse({"hello": "world"})
        elif mode == "rpcerror":
            error = {"code": -32603, "message": "the peer broke"}
            return JSONResponse({"jsonrpc": "2.0", "id": body.get("id"), "error": error})
        elif mode in STREAMING_MODES:
            return StreamingResponse(self._stream(mode, body.get("id")), media_type="text/event-stream")
        return None

    async def _stream(self, mode: str, rid: Any) -> AsyncIterator[bytes]:
        self.open_streams += 1
        try:
            task = {"id": "t-faulty", "contextId": "c-faulty", "status": {"state": "TASK_STATE_WORKING"}}
            if mode == "sse_garbage":
                yield b"data: {this is not json\n\n"
                return
            if mode == "midclose_partial":
                yield b'data: {"jsonrpc": "2.0", "id": 1, "res'
                raise PeerDropped(mode)
            yield _event(rid, {"task": task})
            if mode == "midclose":
                raise PeerDropped(mode)
            chunk = 0
            while not self.stopping.is_set():
                await anyio.sleep(PACE)
                chunk += 1
                if mode == "endless_ping":
                    yield b": ping\n\n"
                elif mode == "endless_working":
                    working = {"taskId": "t-faulty", "contextId": "c-faulty", "status": task["status"]}
                    yield _event(rid, {"statusUpdate": working})
                else:
                    artifact = {"artifactId": "a", "parts": [{"text": f"chunk {chunk} "}]}
                    chunked = {"taskId": "t-faulty", "contextId": "c-faulty", "artifact": artifact}
                    yield _event(rid, {"artifactUpdate": {**chunked, "append": True}})
        finally:
            self.open_streams -= 1

    async def _wait_until_stopped(self) -> None:
        with anyio.move_on_after(3600):
            while not self.stopping.is_set():  # noqa: ASYNC110 - set from the test's thread
                await anyio.sleep(PACE)


def _event(rid: Any, result: dict[str, Any]) -> bytes:
    return f"data: {json.dumps({'jsonrpc': '2.0', 'id': rid, 'result': result})}\n\n".encode()


def _costly(mode: str, rid: Any) -> str:
    """The raw JSON-RPC answer of a USAGE_MODES member: not JSON a strict writer would produce."""
    metadata = f'{{"{CLIENT_ROUTING}": {USAGE_MODES[mode]}}}'
    message = f'{{"messageId": "{uuid.uuid4()}", "role": "ROLE_AGENT", "parts": [{{"text": "spent"}}], '
    message += f'"metadata": {metadata}, "extensions": ["{CLIENT_ROUTING}"]}}'
    if mode.startswith("trail"):
        status = f'{{"state": "TASK_STATE_COMPLETED", "message": {message}}}'
        result = f'{{"task": {{"id": "t-{uuid.uuid4()}", "contextId": "c-faulty", "status": {status}}}}}'
    else:
        result = f'{{"message": {message}}}'
    return f'{{"jsonrpc": "2.0", "id": {json.dumps(rid)}, "result": {result}}}'


def _non_finite(mode: str, rid: Any) -> str:
    """The raw JSON-RPC answer of a NON_FINITE_MODES member."""
    parts, metadata = NON_FINITE_MODES[mode]
    message = f'{{"messageId": "{uuid.uuid4()}", "role": "ROLE_AGENT", "parts": {parts}'
    message += f', "metadata": {metadata}}}' if metadata else "}"
    return f'{{"jsonrpc": "2.0", "id": {json.dumps(rid)}, "result": {{"message": {message}}}}}'


def _message(text: str) -> dict[str, Any]:
    return {"messageId": str(uuid.uuid4()), "role": "ROLE_AGENT", "parts": [{"text": text}]}


async def _endless_card() -> AsyncIterator[bytes]:
    yield b'{"name": "huge", "description": "'
    chunk = b"A" * (1024 * 1024)
    for _ in range(HUGE_CARD_BYTES // len(chunk)):
        yield chunk
    yield b'"}'


@contextlib.contextmanager
def running_faulty() -> Iterator[Faulty]:
    """The peer and the internal service, each on its own 127.0.0.1 port."""
    internal = Internal()
    with ServerThread(internal.app(), name="internal") as inner:
        internal.url = inner.url
        faulty = Faulty(internal=internal)
        with ServerThread(faulty.app(), name="faulty") as server:
            faulty.url, faulty.port = server.url, server.port
            try:
                yield faulty
            finally:
                faulty.stopping.set()


def member_id(mode: str) -> str:
    """The agent id `serve_relaying` gives the peer's agent at /{mode}."""
    return mode.replace("_", "-")


@contextlib.contextmanager
def serve_relaying(
    modes: Collection[str], database: Path, teams: Mapping[str, str] | None = None
) -> Iterator[RunningRanch]:
    """A hub with the peer's `modes` as remote members, served with the peer.

    Per mode, a team per entry of `teams` (id prefix -> more of the team's YAML, a budget say; default
    one plain team "team-{member}"): front hands "costly" to the member (a static route), the
    member's answer comes back to front, which answers the user.
    """
    with (
        running_faulty() as faulty,
        serve_ranch(_relay_config(faulty, modes, teams or {"team": ""}), database) as ranch,
    ):
        yield ranch


def _relay_config(faulty: Faulty, modes: Collection[str], teams: Mapping[str, str]) -> str:
    members = "\n".join(
        f'  - {{id: {member_id(mode)}, kind: remote, url: "{faulty.url}/{mode}"}}' for mode in modes
    )
    relays = "\n".join(
        f"  - {{id: {prefix}-{member_id(mode)}, members: [front, {member_id(mode)}], default_agent: front,"
        f" routes: {{front: {member_id(mode)}, {member_id(mode)}: front}}{more}}}"
        for mode in modes
        for prefix, more in teams.items()
    )
    return f"""
agents:
  - id: front
    kind: rules
    rules:
      - {{match: "costly", reply: "to the member"}}
      - {{reply: "noted", route: user}}
{members}
teams:
{relays}
"""


@contextlib.contextmanager
def not_http() -> Iterator[int]:
    """A port of 127.0.0.1 that accepts every connection and closes it at once, saying nothing."""
    listener = bind_socket()
    listener.listen()
    listener.settimeout(PACE)
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:  # the timeout, to look at `stopping` again
                continue
            connection.close()

    thread = threading.Thread(target=serve, name="not-http", daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        stopping.set()
        thread.join(timeout=5)
        listener.close()
