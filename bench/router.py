"""`python -m bench.router`: what the Router costs per hop, in process and in front of HTTP members.

(a) In process: a team of 10 trivial `kind: python` members (`Hopper`, below) chained so that one
user turn makes exactly 10 hops and ends with recipient "user". `Team.run` is driven directly (no
HTTP). Each member times its own work with perf_counter; ranch's overhead per hop is
(turn time - members' own time) / 10. Two teams, turns interleaved: members that declare the
client-routing extension (they get the peer list every hop and name the next member), and members
that do not (no peer list; the team's static `routes` chain them).

(b) Over HTTP: 10 a2a-sdk echo agents (DefaultRequestHandler, one uvicorn process, one path per
agent) chained by static `routes` in a team of `kind: remote` members, driven in process through
`Team.run`, against the same 10 calls made directly, in a chain, with the same client stack
(`ranch.wire.client.ClientPool`: one httpx client, the a2a-sdk ClientFactory, JSON-RPC, streaming
since the cards say so). Turns of each row are interleaved.

Everything binds and connects to 127.0.0.1; every loop stops after a turn count or a time budget.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx
import yaml
from a2a.client import ClientCallContext
from a2a.types import (
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import ParseDict

from bench.common import HOST, free_port, percentile, server_process, table
from ranch.agents.base import Agent, Call, reply
from ranch.catalog.registry import Registry
from ranch.config import parse_config
from ranch.wire.client import ClientPool
from ranch.wire.client_routing import RoutingDecision

HOPS = 10
MEMBERS = [f"m{i}" for i in range(HOPS)]
TARGET_US_PER_HOP = 200.0
TARGET_RATIO = 1.15


# --------------------------------------------------------------------------- (a) in-process members


@dataclass
class MemberClock:
    """Seconds spent inside the members' own `run` since the last reset."""

    spent: float = 0.0
    calls: int = 0


CLOCK = MemberClock()


class Hopper:
    """A trivial member: answers "ok", naming `to` as the next recipient when given one."""

    def __init__(self, to: str | None = None) -> None:
        self.decision = RoutingDecision(recipient=to) if to else None

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Message, None]:
        started = time.perf_counter()
        answer = reply(message, "ok", self.decision)
        CLOCK.spent += time.perf_counter() - started
        CLOCK.calls += 1
        yield answer


def chain_routes() -> dict[str, str]:
    return dict(zip(MEMBERS, [*MEMBERS[1:], "user"], strict=True))


def hopper_config(routing: bool) -> str:
    """10 python members and a team; routing members decide, the others follow static routes."""
    routes = chain_routes()
    agents = [
        {
            "id": member,
            "kind": "python",
            "entry": "bench.router:Hopper",
            "client_routing": routing,
            "options": {"to": routes[member]} if routing else {},
        }
        for member in MEMBERS
    ]
    team: dict[str, Any] = {"id": "chain", "members": MEMBERS, "default_agent": MEMBERS[0]}
    if not routing:
        team["routes"] = routes
    return yaml.safe_dump({"agents": agents, "teams": [team]})


def remote_config(base: str, history_length: int | None) -> str:
    """10 remote members (the echo agents) chained by static routes."""
    agents = [{"id": member, "kind": "remote", "url": f"{base}/{member}"} for member in MEMBERS]
    team: dict[str, Any] = {
        "id": "chain",
        "members": MEMBERS,
        "default_agent": MEMBERS[0],
        "routes": chain_routes(),
    }
    if history_length is not None:
        team["history_length"] = history_length
    return yaml.safe_dump({"agents": agents, "teams": [team]})


def user_message(text: str = "hello") -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])


async def team_turn(team: Agent) -> float:
    """One user turn through `team` (a fresh context); its wall time in seconds. Checks the 10 hops."""
    message = user_message()
    hops = 0
    final: Any = None
    started = time.perf_counter()
    async for event in team.run(message, Call()):
        if isinstance(event, TaskArtifactUpdateEvent):
            hops += 1
        final = event
    elapsed = time.perf_counter() - started
    if not (
        isinstance(final, TaskStatusUpdateEvent)
        and final.status.state == TaskState.TASK_STATE_COMPLETED
        and hops == HOPS
    ):
        raise SystemExit(f"bench.router: a turn did not complete in {HOPS} hops ({hops} hops, {final})")
    return elapsed


@dataclass
class Series:
    """Per-turn measurements of one row."""

    turns: list[float] = field(default_factory=list)
    members: list[float] = field(default_factory=list)

    def overhead_per_hop(self) -> list[float]:
        return [(turn - own) / HOPS for turn, own in zip(self.turns, self.members, strict=True)]


async def interleave(
    rows: Mapping[str, Callable[[], Awaitable[float]]], warmup: int, turns: int, seconds: float
) -> dict[str, Series]:
    """Run one turn of each row in turn (ABAB...), after `warmup` unrecorded rounds; bounded."""
    for _ in range(warmup):
        for run in rows.values():
            await run()
    series = {name: Series() for name in rows}
    deadline = time.perf_counter() + seconds
    for _ in range(turns):
        for name, run in rows.items():
            CLOCK.spent, CLOCK.calls = 0.0, 0
            elapsed = await run()
            series[name].turns.append(elapsed)
            series[name].members.append(CLOCK.spent)
        if time.perf_counter() > deadline:
            break
    return series


async def in_process(turns: int, seconds: float) -> dict[str, Series]:
    async with ClientPool() as pool:
        routing = Registry(parse_config(hopper_config(routing=True)), pool)
        static = Registry(parse_config(hopper_config(routing=False)), pool)
        try:
            rows = {
                "routing": lambda: team_turn(routing.get("chain")),
                "static": lambda: team_turn(static.get("chain")),
            }
            return await interleave(rows, warmup=30, turns=turns, seconds=seconds)
        finally:
            await routing.aclose()
            await static.aclose()


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.0f}"


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f}"


def in_process_table(results: dict[str, Series]) -> str:
    labels = {
        "routing": "routing members (peer list each hop, member decides)",
        "static": "non-routing members (static `routes` chain)",
    }
    rows = []
    for name, series in results.items():
        overhead = series.overhead_per_hop()
        p50 = statistics.median(overhead)
        rows.append(
            [
                labels[name],
                len(series.turns),
                ms(statistics.median(series.turns)),
                ms(percentile(series.turns, 0.99)),
                us(statistics.median(series.members) / HOPS),
                us(p50),
                us(percentile(overhead, 0.99)),
                "yes" if p50 * 1e6 <= TARGET_US_PER_HOP else "**no**",
            ]
        )
    note = (
        f"One user turn = {HOPS} hops through `Team.run` in process (no HTTP), `kind: python` members "
        'that answer "ok" at once; turns of the two rows interleaved, fresh contextId per turn. '
        "*member µs/hop*: time inside the members' own `run()` (perf_counter inside them); "
        f"*ranch µs/hop* = (turn - members' time) / {HOPS}, i.e. everything ranch does per hop "
        f"(Turn, context, events, PythonAgent wrapper). Target: <= {TARGET_US_PER_HOP:.0f} µs/hop."
    )
    header = [
        "team of 10",
        "turns",
        "turn p50 ms",
        "turn p99 ms",
        "member µs/hop p50",
        "ranch µs/hop p50",
        "ranch µs/hop p99",
        "<= 200 µs",
    ]
    return table("Router, 10-hop turn in process", header, rows, note)


# --------------------------------------------------------------------------- (b) members over HTTP


def members_app(port: int) -> Any:
    """10 a2a-sdk echo agents (bench.servers.EchoExecutor) on /m0 ... /m9 of one Starlette app.

    Each keeps the last message it received; `GET /received` returns them, so the direct
    baseline can send exactly what a ranch turn sent.
    """
    from a2a.server.agent_execution.context import RequestContext
    from a2a.server.events.event_queue import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
    from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
    from google.protobuf.json_format import MessageToDict
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Mount, Route

    from bench.servers import EchoExecutor

    received: dict[str, Message] = {}

    class RecordingEcho(EchoExecutor):
        def __init__(self, member: str) -> None:
            self.member = member

        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            if context.message is not None:
                received[self.member] = context.message
            await super().execute(context, event_queue)

    async def last_received(request: Request) -> JSONResponse:
        return JSONResponse({member: MessageToDict(message) for member, message in received.items()})

    mounts: list[Any] = [Route("/received", last_received)]
    for member in MEMBERS:
        card = AgentCard(
            name=member,
            description="echo",
            version="1",
            supported_interfaces=[
                AgentInterface(
                    protocol_binding="JSONRPC",
                    protocol_version="1.0",
                    url=f"http://{HOST}:{port}/{member}/",
                )
            ],
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="echo", name="echo", description="echo", tags=["echo"])],
        )
        handler = DefaultRequestHandler(
            agent_executor=RecordingEcho(member), task_store=InMemoryTaskStore(), agent_card=card
        )
        routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
        mounts.append(Mount(f"/{member}", routes=routes))
    return Starlette(routes=mounts)


def serve_members(port: int) -> None:
    """Entry of the members' process: `python -c 'from bench.router import serve_members; ...'`."""
    import uvicorn

    uvicorn.run(members_app(port), host=HOST, port=port, log_level="warning", access_log=False)


async def direct_turn(pool: ClientPool, urls: list[str], sent: list[list[Part]] | None = None) -> float:
    """The same chain without ranch: each member's reply parts become the next member's message.

    With `sent`, member i gets exactly the parts a ranch turn sent it (its context part included).
    """
    parts = [Part(text="hello")]
    started = time.perf_counter()
    for index, url in enumerate(urls):
        client = await pool.client(url)
        if sent is not None:
            parts = sent[index]
        request = SendMessageRequest(
            message=Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=parts)
        )
        answer: Message | None = None
        async for response in client.send_message(request, context=ClientCallContext(timeout=60.0)):
            if response.HasField("message"):
                answer = response.message
        if answer is None:
            raise SystemExit(f"bench.router: {url} did not answer with a message")
        parts = list(answer.parts)
    return time.perf_counter() - started


async def ranch_payloads(base: str, team: Agent) -> list[list[Part]]:
    """The parts one ranch turn sends each member, as the members received them."""
    await team_turn(team)
    async with httpx.AsyncClient() as http:
        received = (await http.get(f"{base}/received", timeout=10)).json()
    return [list(ParseDict(received[member], Message()).parts) for member in MEMBERS]


async def over_http(base: str, turns: int, seconds: float) -> dict[str, Series]:
    urls = [f"{base}/{member}" for member in MEMBERS]
    async with ClientPool() as ranch_pool, ClientPool() as direct_pool:
        default = Registry(parse_config(remote_config(base, None)), ranch_pool)
        no_context = Registry(parse_config(remote_config(base, 0)), ranch_pool)
        try:
            sent = await ranch_payloads(base, default.get("chain"))
            rows = {
                "direct": lambda: direct_turn(direct_pool, urls),
                "direct-context": lambda: direct_turn(direct_pool, urls, sent),
                "ranch": lambda: team_turn(default.get("chain")),
                "ranch0": lambda: team_turn(no_context.get("chain")),
            }
            return await interleave(rows, warmup=5, turns=turns, seconds=seconds)
        finally:
            await default.aclose()
            await no_context.aclose()


def over_http_table(results: dict[str, Series]) -> str:
    labels = {
        "direct": "direct a2a-sdk calls, 10 in a chain (baseline A)",
        "direct-context": "direct a2a-sdk calls sending ranch's payloads (baseline B)",
        "ranch": "ranch team turn, default (context part) vs B",
        "ranch0": "ranch team turn, `history_length: 0` (same payloads as A) vs A",
    }
    baseline = {"ranch": "direct-context", "ranch0": "direct", "direct-context": "direct"}
    rows = []
    for name, series in results.items():
        p50, p99 = statistics.median(series.turns), percentile(series.turns, 0.99)
        against = results[baseline.get(name, "direct")].turns
        base, base99 = statistics.median(against), percentile(against, 0.99)
        ratio = p50 / base
        judged = name in ("ranch", "ranch0")
        rows.append(
            [
                labels[name],
                len(series.turns),
                ms(p50),
                ms(p99),
                us((p50 - base) / HOPS) if judged else "-",
                f"{ratio:.2f}x",
                f"{p99 / base99:.2f}x",
                ("yes" if ratio <= TARGET_RATIO else "**no**") if judged else "-",
            ]
        )
    note = (
        f"{HOPS} a2a-sdk echo agents (DefaultRequestHandler + InMemoryTaskStore, one uvicorn process, "
        "one path each; an echo makes no routing decision, so the team chains them with static "
        "`routes`). Both sides call them the same way: `ClientPool` (one httpx client, a2a-sdk "
        "ClientFactory), JSON-RPC 1.0, **streaming** (SendStreamingMessage over SSE, as ranch does "
        "since the cards declare streaming), in the same process and event loop, turns interleaved. "
        "By default ranch prepends a context part (what the member has not seen), and these echo "
        "members echo it back, so payloads grow along the chain: baseline B sends each member exactly "
        "the parts a ranch turn sent it (recorded by the members), so ranch's row is compared with the "
        "same calls made directly. The `history_length: 0` row sends the same bytes as baseline A. "
        f"*ranch µs/hop*: (p50 - its baseline's p50) / {HOPS}. Target ratio <= {TARGET_RATIO}x."
    )
    header = [
        "10-member chain over HTTP",
        "turns",
        "turn p50 ms",
        "turn p99 ms",
        "ranch µs/hop",
        "p50 vs baseline",
        "p99 vs baseline",
        f"<= {TARGET_RATIO}x",
    ]
    return table("Router, 10 remote members over HTTP vs direct calls", header, rows, note)


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m bench.router", description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("all", "in-process", "http"), default="all")
    parser.add_argument("--turns", type=int, default=600, help="max turns per row, in process")
    parser.add_argument("--seconds", type=float, default=10.0, help="time budget, in process")
    parser.add_argument("--http-turns", type=int, default=200, help="max turns per row, over HTTP")
    parser.add_argument("--http-seconds", type=float, default=20.0, help="time budget, over HTTP")
    args = parser.parse_args(argv)
    sections = []
    if args.part in ("all", "in-process"):
        sections.append(in_process_table(asyncio.run(in_process(args.turns, args.seconds))))
    if args.part in ("all", "http"):
        port = free_port()
        base = f"http://{HOST}:{port}"
        command = [sys.executable, "-c", f"from bench.router import serve_members; serve_members({port})"]
        with server_process(command, f"{base}/{MEMBERS[0]}/.well-known/agent-card.json"):
            results = asyncio.run(over_http(base, args.http_turns, args.http_seconds))
        sections.append(over_http_table(results))
    section = "\n".join(sections)
    print(section)
    return section


if __name__ == "__main__":
    # run as the importable module, so `entry: bench.router:Hopper` and this code share CLOCK
    from bench.router import main as _main

    _main()
