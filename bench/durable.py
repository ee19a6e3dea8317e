"""`python -m bench durable [--before REV] [--rounds N] [--conversations N]`: what durable team turns
cost, and how soon a killed replica's turn completes on another.

1. **Cost.** Team turns of 3 hops, as `ranch serve` serves them (SQLite, rate limits off), measured
   against the tree at `--before` (default: the commit before durable turns) served from a git
   worktree beside this one, rounds interleaved, both servers on the machine at once:
   - `quick`: bench.scale's team of three in-process members (`rules`, `rules`, `echo`), whose hops'
     checkpoints go out with the task's end (no commit more);
   - `remote`: three a2a-sdk echo agents in a process of their own (bench.router's), chained by static
     routes: each hop starts once its checkpoint is committed, the worst case for CPU.
   N conversations at once, 3 turns each (SendMessage over keep-alive connections); the server's CPU
   per turn (/proc) per tree, and the ratio. Target: <= 1.15x.
2. **Take-over.** Two replicas on PostgreSQL and Redis with `--lease L`; a team of three a2a-sdk
   members that each work W seconds (one process of their own); a turn is started on the first
   replica, which is killed (`kill -9`) halfway through hop 2; the time until the second answers
   GetTask COMPLETED, against L + what was left of the work (half of hop 2 and hop 3). The remote
   member is re-attached to, so hop 2 is not done again. Target: within that bound (plus the
   take-over round, at most L/2).

Everything binds and connects to 127.0.0.1; every loop is bounded in turns and seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from bench.common import HOST, ROOT, cpu_seconds, free_port, median, ranch_serve, server_process, table
from bench.scale import CONFIG as QUICK_CONFIG
from bench.scale import budget, conversations
from ranch.wire.client_routing import URI

BEFORE = "c3ef07b~1"
"""The tree before durable turns (the commit that added them is c3ef07b)."""
TARGET = 1.15
LEASE = 2.0
WORK_S = 1.0
"""Seconds each member of the take-over team works on its hop."""
DONE_WITHIN = 60.0


def remote_config(base: str) -> str:
    """bench.router's first three echo agents, chained by static routes, as team `desk`."""
    members = ["m0", "m1", "m2"]
    agents = [{"id": member, "kind": "remote", "url": f"{base}/{member}"} for member in members]
    team = {"id": "desk", "members": members, "default_agent": "m0", "routes": {"m0": "m1", "m1": "m2"}}
    return yaml.safe_dump({"agents": agents, "teams": [team]})


@contextlib.contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """The tree at `rev`, checked out beside this one (removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="ranch-before-") as tmp:
        path = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "--detach", str(path), rev], cwd=ROOT, check=True,
                       capture_output=True)  # fmt: skip
        try:
            yield path
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, check=False,
                           capture_output=True)  # fmt: skip


def cost(kind: str, config_text: str, before: Path, rounds: int, count: int, workdir: Path) -> list[object]:
    """Server CPU ms per turn of each tree, interleaved rounds; the table row."""
    config = workdir / f"{kind}.yaml"
    config.write_text(config_text)
    trees = {"before": before / "src", "now": ROOT / "src"}
    spent: dict[str, list[float]] = {name: [] for name in trees}
    with contextlib.ExitStack() as stack:
        servers = {
            name: (stack.enter_context(_served(config, workdir / f"{kind}-{name}.db", src)))
            for name, src in trees.items()
        }
        for name, (_process, port) in servers.items():  # warm-up: imports, caches, the first connections
            asyncio.run(conversations(port, 10, f"warm-{name}", time.perf_counter() + budget(10)))
        for round_number in range(rounds):
            order = list(servers.items()) if round_number % 2 == 0 else list(reversed(servers.items()))
            for name, (process, port) in order:
                started = cpu_seconds(process.pid)
                outcome, _ = asyncio.run(
                    conversations(port, count, f"{name}-{round_number}", time.perf_counter() + budget(count))
                )
                if outcome.errors:
                    raise SystemExit(f"{kind} {name}: {outcome.errors} turn(s) failed: {outcome.examples}")
                spent[name].append((cpu_seconds(process.pid) - started) * 1000 / outcome.completed)
    was, now = median(spent["before"]), median(spent["now"])
    ratio = now / was
    return [
        kind,
        rounds,
        count * 3,
        f"{was:.2f}",
        f"{now:.2f}",
        f"{ratio:.2f}x",
        "yes" if ratio <= TARGET else "no",
    ]


@contextlib.contextmanager
def _served(config: Path, database: Path, src: Path) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    port = free_port()
    env = {"PYTHONPATH": f"{src}:{ROOT}:{ROOT / 'tests'}"}
    with server_process(ranch_serve(config, port, database), f"http://{HOST}:{port}/healthz", quiet=True,
                        env=env) as process:  # fmt: skip
        yield process, port


def take_over(work: float, lease: float) -> list[object]:
    """Seconds from kill -9 of the replica running a turn to its completion on the other."""
    from bench.cluster import database as postgres

    members = free_port()
    base = f"http://{HOST}:{members}"
    member_command = [
        sys.executable,
        "-c",
        f"from bench.durable import serve_workers; serve_workers({members}, {work})",
    ]
    with (
        tempfile.TemporaryDirectory(prefix="ranch-takeover-") as tmp,
        postgres() as url,
        server_process(member_command, f"{base}/m0/.well-known/agent-card.json", quiet=True),
    ):
        config = Path(tmp) / "team.yaml"
        config.write_text(remote_config(base))
        prefix = f"ranch-bench-{uuid.uuid4().hex[:8]}"
        flags = ["--lease", str(lease), "--redis-url", "redis://127.0.0.1:6379/0", "--redis-prefix", prefix,
                 "--cluster-secret", uuid.uuid4().hex, "--allow-private-outbound"]  # fmt: skip
        ports = free_port(), free_port()
        commands = [
            _with_db(ranch_serve(config, port, Path(tmp) / "unused.db", *flags), url) for port in ports
        ]
        with (
            server_process(commands[0], f"http://{HOST}:{ports[0]}/healthz", quiet=True) as first,
            server_process(commands[1], f"http://{HOST}:{ports[1]}/healthz", quiet=True),
        ):
            message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "go"}]}
            params = {"message": message, "configuration": {"returnImmediately": True}}
            task_id = _rpc(ports[0], "SendMessage", params)["task"]["id"]
            time.sleep(work * 1.5)  # hop 1 done, hop 2 half done
            first.kill()
            killed = time.perf_counter()
            while time.perf_counter() - killed < DONE_WITHIN:
                task = _rpc(ports[1], "GetTask", {"id": task_id})
                if task["status"]["state"] in ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED"):
                    break
                time.sleep(0.05)
            took = time.perf_counter() - killed
    state = task["status"]["state"].removeprefix("TASK_STATE_").lower()
    trail = task.get("metadata", {}).get(URI, {}).get("trail", [])
    hops = " -> ".join(hop["agent"] for hop in trail)
    bound = lease + work * 1.5 + lease / 2  # detected, the rest of hop 2 and hop 3, a take-over round
    met = "yes" if took <= bound and state == "completed" else "no"
    return [f"{lease:g}", f"{work:g}", state, hops, f"{took:.2f}", f"{bound:.2f}", met]


def _with_db(command: list[str], url: str) -> list[str]:
    at = command.index("--db")
    return [*command[: at + 1], url, *command[at + 2 :]]


def _rpc(port: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = httpx.post(
        f"http://{HOST}:{port}/a2a/agents/desk", json=body, headers={"A2A-Version": "1.0"}, timeout=30
    )
    result: dict[str, Any] = answer.json()["result"]
    return result


def serve_workers(port: int, work: float) -> None:
    """Entry of the take-over members' process: m0..m2, a2a-sdk agents that open a task, work `work`
    seconds and complete it with the text they got."""
    import uvicorn
    from a2a.server.agent_execution.context import RequestContext
    from a2a.server.events.event_queue import EventQueue
    from a2a.server.request_handlers import DefaultRequestHandler
    from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
    from a2a.server.tasks.inmemory_task_store import InMemoryTaskStore
    from a2a.server.tasks.task_updater import TaskUpdater
    from a2a.types import (
        AgentCapabilities,
        AgentCard,
        AgentInterface,
        AgentSkill,
        Message,
        Part,
        Role,
        Task,
        TaskState,
        TaskStatus,
    )
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from bench.servers import EchoExecutor

    class Worker(EchoExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            task_id, context_id = context.task_id or "", context.context_id or ""
            if context.current_task is None:
                status = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
                await event_queue.enqueue_event(Task(id=task_id, context_id=context_id, status=status))
            updater = TaskUpdater(event_queue, task_id, context_id)
            await updater.start_work()
            await asyncio.sleep(work)
            said = [Part(text=context.get_user_input()[-200:])]
            reply = Message(role=Role.ROLE_AGENT, message_id=uuid.uuid4().hex, task_id=task_id, parts=said)
            await updater.complete(reply)

    mounts: list[Any] = []
    for member in ("m0", "m1", "m2"):
        interface = AgentInterface(
            protocol_binding="JSONRPC", protocol_version="1.0", url=f"http://{HOST}:{port}/{member}/"
        )
        card = AgentCard(
            name=member,
            description="works, then echoes",
            version="1",
            supported_interfaces=[interface],
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[AgentSkill(id="work", name="work", description="works, then echoes", tags=["work"])],
        )
        handler = DefaultRequestHandler(
            agent_executor=Worker(), task_store=InMemoryTaskStore(), agent_card=card
        )
        mounts.append(
            Mount(
                f"/{member}",
                routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")],
            )
        )
    uvicorn.run(Starlette(routes=mounts), host=HOST, port=port, log_level="warning", access_log=False)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(
        prog="python -m bench.durable", description=(__doc__ or "").split("\n\n")[0]
    )
    parser.add_argument("--before", default=BEFORE, help="the tree to compare with (a git revision)")
    parser.add_argument("--rounds", type=int, default=6, help="interleaved rounds per tree")
    parser.add_argument("--conversations", type=int, default=20, help="conversations at once per round")
    parser.add_argument("--part", choices=("all", "cost", "take-over"), default="all")
    args = parser.parse_args(argv)
    sections: list[str] = []
    if args.part in ("all", "cost"):
        rows: list[list[object]] = []
        with tempfile.TemporaryDirectory(prefix="ranch-durable-") as tmp, worktree(args.before) as before:
            workdir = Path(tmp)
            rows.append(cost("quick", QUICK_CONFIG, before, args.rounds, args.conversations, workdir))
            port = free_port()
            base = f"http://{HOST}:{port}"
            command = [sys.executable, "-c", f"from bench.router import serve_members; serve_members({port})"]
            with server_process(command, f"{base}/m0/.well-known/agent-card.json", quiet=True):
                rows.append(
                    cost("remote", remote_config(base), before, args.rounds, args.conversations, workdir)
                )
        was = f"CPU ms/turn at {args.before}"
        header = ["team", "rounds", "turns/round", was, "CPU ms/turn now", "ratio", f"<= {TARGET}x"]
        sections.append(table("Durable turns: server CPU per 3-hop turn, side by side", header, rows))
    if args.part in ("all", "take-over"):
        header = ["lease s", "work/hop s", "state", "trail", "kill -9 -> completed s", "bound s", "within"]
        sections.append(table("Durable turns: a killed replica's turn completed by another", header,
                              [take_over(WORK_S, LEASE)]))  # fmt: skip
    text = "\n".join(sections)
    print(text)
    return text


if __name__ == "__main__":
    main()
