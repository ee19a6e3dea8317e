"""`ranch rooms`, `ranch post`, `ranch watch`, `ranch agents`: the hub from a terminal, on `ranch.client`.

Each reads the server from `--url` (env RANCH_URL) and the key from `--key` (env RANCH_API_KEY);
output is for people on a terminal, and JSON with `--json` (one document, or one line per event
for `watch`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import anyio

from ranch.cli import DEFAULT_URL
from ranch.exceptions import RanchError
from ranch.protocol.vocabulary import ExecutionStatus

if TYPE_CHECKING:  # the client loads when a command runs, so `ranch rooms --help` starts at once
    from ranch.client import DeliveryView, EventView, Hub

    Command = Callable[[Hub, argparse.Namespace], Coroutine[Any, Any, int]]


def register(commands: Any) -> None:
    _command(commands, "rooms", "list the rooms you take part in", list_rooms)
    post = _command(commands, "post", "post a message (and files) into a room", post_message)
    post.add_argument("room", help="room id")
    post.add_argument("text", nargs="?", help="the message (mention agents with @id)")
    post.add_argument("--file", action="append", default=[], metavar="PATH", help="attach a file (repeat it)")
    about = "follow a room live: messages, agents' status, each team's route"
    watch = _command(commands, "watch", about, watch_room)
    watch.add_argument("room", help="room id")
    watch.add_argument(
        "--last", type=int, default=10, metavar="N", help="first show the last N messages (10)"
    )
    watch.add_argument(
        "--since", type=int, metavar="CURSOR", help="replay the events after this cursor of the room's events"
    )
    agents = _command(commands, "agents", "list the agents and teams you can use", list_agents)
    agents.add_argument("--skill", help="only those with a skill whose id or name contains this")
    agents.add_argument("--tag", help="only those with a skill tagged this")
    agents.add_argument("--mode", help="only those taking or giving this media type (image/*)")


def _command(commands: Any, name: str, help: str, command: Command) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help, description=help)
    url, key = os.environ.get("RANCH_URL", DEFAULT_URL), os.environ.get("RANCH_API_KEY", "")
    parser.add_argument("--url", default=url, help="server (env RANCH_URL)")
    parser.add_argument("--key", default=key, help="API key (env RANCH_API_KEY)")
    parser.add_argument("--json", action="store_true", help="print JSON, for scripts")
    parser.set_defaults(handler=lambda args: anyio.run(_run, command, args))
    return parser


async def _run(command: Command, args: argparse.Namespace) -> int:
    from ranch.client import Hub, HubError, Unreachable

    try:
        async with Hub(args.url, args.key, retries=1) as hub:
            return await command(hub, args)
    except Unreachable as exc:
        raise RanchError(f"cannot reach ranch at {args.url}; is `ranch serve` running?") from exc
    except HubError as exc:
        where = f" ({exc.field})" if exc.field else ""
        raise RanchError(f"{exc.message or exc}{where}") from exc


async def list_rooms(hub: Hub, args: argparse.Namespace) -> int:
    rooms = await hub.rooms()
    if args.json:
        _json([room.model_dump(mode="json") for room in rooms])
        return 0
    if not rooms:
        print("no rooms yet (create one on the web page or with POST /api/v1/rooms)")
    for room in rooms:
        answers = f"  answers: @{room.default_agent}" if room.default_agent else ""
        print(f"{room.id:<24} {room.title or '-':<28} {room.status}{answers}")
    return 0


async def list_agents(hub: Hub, args: argparse.Namespace) -> int:
    agents = await hub.agents(skill=args.skill, tag=args.tag, mode=args.mode)
    if args.json:
        _json([agent.model_dump(mode="json") for agent in agents])
        return 0
    if not agents:
        print("no agent matches" if (args.skill or args.tag or args.mode) else "no agents")
    for agent in agents:
        members = f"  members: {', '.join(agent.members)}" if agent.members else ""
        print(f"{agent.id:<24} {agent.kind:<9} {agent.name}{members}")
    return 0


async def post_message(hub: Hub, args: argparse.Namespace) -> int:
    if args.text is None and not args.file:
        raise RanchError("give the message's text, a --file, or both")
    message = await hub.post(args.room, args.text, files=args.file)
    if args.json:
        _json(message.model_dump(mode="json"))
        return 0
    woke = f", addressed to {', '.join('@' + m for m in message.mentions)}" if message.mentions else ""
    print(f"posted {message.id} in {message.room_id} (cursor {message.cursor}{woke})")
    return 0


async def watch_room(hub: Hub, args: argparse.Namespace) -> int:
    """Until Ctrl-C: the room's last messages, then every event as it comes."""
    room = await hub.room(args.room)
    line_by_line(sys.stdout)
    view = Watch(json_lines=args.json)
    if args.since is None:  # the cursor first: what is posted meanwhile comes again, and is shown once
        cursor = await hub.latest_cursor(room.id)
        for message in await hub.history(room.id, before=2**63 - 1, limit=max(args.last, 0)):
            view.message(message.model_dump(mode="json"))
    else:
        cursor = args.since
    if not args.json:
        title = room.title or "untitled"
        print(f"-- watching {room.id} ({title}); Ctrl-C to stop", file=sys.stderr, flush=True)
    async with hub.events({room.id: cursor}) as stream:
        async for event in stream:
            view.on(event)
    return 0


def line_by_line(stream: Any) -> None:
    """A pipe or a file gets each line as it is printed, as a terminal does (Python would buffer it
    by the block), and a character its encoding lacks as an escape rather than an error that ends
    the watch: `ranch watch demo | grep route` and `> watch.log` show events as they happen."""
    if not stream.isatty() and hasattr(stream, "reconfigure"):
        stream.reconfigure(line_buffering=True, errors="backslashreplace")


class Watch:
    """Events as lines a person reads (or as JSON lines): messages, statuses, each hop of a team's
    route as it is decided, and the whole route when the turn comes back to the user."""

    def __init__(self, *, json_lines: bool) -> None:
        self.json_lines = json_lines
        self.routes: dict[str, list[dict[str, Any]]] = {}
        self.shown: set[str] = set()
        self.agents: dict[str, str] = {}
        """Execution id -> its agent, for the agent a handoff's result goes back to."""

    def on(self, event: EventView | DeliveryView) -> None:
        from ranch.client import DeliveryView

        if isinstance(event, DeliveryView):
            return
        if event.type == "message.created" and event.data.get("id") in self.shown:
            return  # shown from the history already
        if self.json_lines:
            print(json.dumps(event.model_dump(mode="json"), ensure_ascii=False), flush=True)
            return
        data = event.data
        if event.type == "message.created":
            self.message(data)
        elif event.type == "execution.updated":
            self.execution(data)
        elif event.type == "routing.decided":
            self.hop(data)
        elif event.type in ("participant.joined", "participant.left"):
            print(f"   · {data.get('id')} {event.type.split('.')[1]}", flush=True)

    def execution(self, data: dict[str, Any]) -> None:
        """A status; a handoff as it is made (`⇢`) and as its result goes back to the agent waiting (`⇠`)."""
        agent, status = data.get("agent_id"), data.get("status")
        self.agents[str(data.get("id"))] = str(agent)
        if status == ExecutionStatus.HANDOFF:
            print(f"   ⇢ {agent} {data.get('reason') or 'handed off'}", flush=True)
            return
        failed = status == ExecutionStatus.FAILED
        reason = f" ({data['reason']})" if data.get("reason") and failed else ""
        print(f"   · {agent} {status}{reason}", flush=True)
        parent = self.agents.get(str(data.get("parent_execution_id")))
        if parent is not None and status in (
            ExecutionStatus.COMPLETED,
            ExecutionStatus.FAILED,
            ExecutionStatus.CANCELED,
        ):
            print(f"   ⇠ {agent} {status}: back to {parent}", flush=True)

    def message(self, data: dict[str, Any]) -> None:
        if data.get("id") in self.shown:
            return
        self.shown.add(str(data.get("id")))
        if self.json_lines:
            print(json.dumps({"type": "message", "data": data}, ensure_ascii=False), flush=True)
            return
        from ranch.client import MessageView

        message = MessageView.model_validate(data)
        stamp = message.created_at[11:19]
        kind = "" if message.type == "text" else f" [{message.type}]"
        print(f"{stamp} {message.sender.id}{kind}: {message.text}", flush=True)
        for part in message.parts:
            if "text" in part:
                continue
            if "data" in part:
                print(f"         [data] {json.dumps(part['data'], ensure_ascii=False)[:200]}", flush=True)
            else:
                name = part.get("filename") or part.get("url") or "file"
                size = f", {part['size']} bytes" if "size" in part else ""  # a file on the hub
                media_type = part.get("mediaType", "application/octet-stream")
                print(f"         [file] {name} ({media_type}{size})", flush=True)

    def hop(self, data: dict[str, Any]) -> None:
        hops = self.routes.setdefault(str(data.get("execution_id")), [])
        hops.append(data)
        ms = f" {data['ms']:.0f} ms" if isinstance(data.get("ms"), int | float) else ""
        reason = f" ({data['reason']})" if data.get("reason") else ""
        print(f"   -> {data.get('agent')} -> {data.get('recipient')}{reason}{ms}", flush=True)
        if data.get("recipient") == "user":
            route = " -> ".join(["user", *(str(hop.get("agent")) for hop in hops), "user"])
            trace = f"  trace {data['trace_id']}" if data.get("trace_id") else ""
            print(f"   route: {route}{trace}", flush=True)
            del self.routes[str(data.get("execution_id"))]


def _json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, indent=2))
