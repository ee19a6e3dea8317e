"""`ranch send TARGET TEXT`: talk to a running server with the a2a-sdk client; print reply and route."""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from typing import Any

import anyio
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.client.errors import AgentCardResolutionError
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
)
from a2a.utils.constants import TransportProtocol
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict

from ranch.agents.base import text_of
from ranch.agents.fold import state_name
from ranch.cli import DEFAULT_URL
from ranch.exceptions import RanchError
from ranch.ids import random_hex
from ranch.wire import client_routing, keys
from ranch.wire.cards import agent_url
from ranch.wire.events import COMPLETED, FAILED, INPUT_REQUIRED


def register(commands: Any) -> None:
    parser = commands.add_parser("send", help="send TEXT to an agent or team of a running server")
    parser.add_argument("target", help="agent or team id")
    parser.add_argument("text", help="the message")
    parser.add_argument(
        "--url", default=os.environ.get("RANCH_URL", DEFAULT_URL), help="server (env RANCH_URL)"
    )
    parser.add_argument(
        "--key",
        default=os.environ.get("RANCH_API_KEY", ""),
        help="API key, for a server run with --auth keys (env RANCH_API_KEY)",
    )
    parser.add_argument("--context", default="", help="continue the conversation with this contextId")
    parser.add_argument(
        "--stream", action="store_true", help="print each hop as it happens, its text growing in place"
    )
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the answer")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    return anyio.run(send, args)


async def send(args: argparse.Namespace) -> int:
    base = agent_url(args.url, args.target)
    trace_id = random_hex()  # the turn's trace: the server continues it, so its spans and logs carry it
    traceparent = f"00-{trace_id}-{random_hex()[:16]}-01"
    headers = {"traceparent": traceparent}
    if args.key:  # the cards are public; every A2A call presents the key (docs/policies.md)
        headers["Authorization"] = f"Bearer {args.key}"
    async with httpx.AsyncClient(timeout=args.timeout, headers=headers) as http:
        try:
            card = await A2ACardResolver(http, base).get_agent_card()
        except AgentCardResolutionError as exc:
            refused = _refused_key(args, exc.status_code or 0)
            if refused:
                raise RanchError(refused) from exc
            if exc.status_code == 404:
                raise RanchError(
                    f"no agent or team '{args.target}' at {args.url} (GET /a2a/agents lists them)"
                ) from exc
            if isinstance(exc.__cause__, httpx.RequestError):
                raise RanchError(f"cannot reach ranch at {args.url}; is `ranch serve` running?") from exc
            raise RanchError(f"cannot read the card at {base}: {exc.message}") from exc
        except httpx.HTTPError as exc:
            raise RanchError(
                f"cannot reach ranch at {args.url} ({exc!r}); is `ranch serve` running?"
            ) from exc
        config = ClientConfig(
            httpx_client=http, streaming=args.stream, supported_protocol_bindings=[TransportProtocol.JSONRPC]
        )
        client = ClientFactory(config).create(card)
        message = Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            context_id=args.context,
            parts=[Part(text=args.text)],
        )
        printer = Printer(streaming=args.stream, trace_id=trace_id)
        try:
            async for response in client.send_message(SendMessageRequest(message=message)):
                printer.on(response)
        except A2AError as exc:
            raise RanchError(_answered_error(args, exc)) from exc
        finally:
            printer.end_line()
    return printer.finish()


def _answered_error(args: argparse.Namespace, exc: A2AError) -> str:
    """The one line for an error answer: a refused key says which flag gives one."""
    status = exc.__cause__.response.status_code if isinstance(exc.__cause__, httpx.HTTPStatusError) else 0
    return _refused_key(args, status) or f"{args.target} answered with an error: {exc}"


def _refused_key(args: argparse.Namespace, status: int) -> str:
    """For a 401 or 403: what was wrong with the key, and how to give one; else ""."""
    if status == 401:
        given = "the key given was refused" if args.key else "no API key was given"
        return f"{args.target} at {args.url} needs an API key: {given} (--key, or env RANCH_API_KEY)"
    if status == 403:
        return f"{args.target} at {args.url} refused this key (403): it may not call that agent"
    return ""


class Printer:
    """Turns stream responses into the lines a person wants to read.

    Streaming, each hop is one block: its `-> agent (reason)` line, then one line of its text,
    which grows in place as chunks arrive (a 300-token answer is one line, not 300), as
    `ranch watch` draws a route.
    """

    def __init__(self, streaming: bool, trace_id: str = "") -> None:
        self.streaming = streaming
        self.trace_id = trace_id
        self.task: Task | None = None
        self.reply: Message | None = None
        self.growing = ""
        """The id of the artifact whose line is open (its text still arriving), or ""."""
        self.shown = ""
        """What that line shows of the artifact's text so far."""

    def on(self, response: StreamResponse) -> None:
        kind = response.WhichOneof("payload")
        if kind == "message":
            self.reply = response.message
        elif kind == "task":
            self.task = response.task
        elif kind == "status_update" and self.task is not None:
            self.task.status.CopyFrom(response.status_update.status)
            self.task.metadata.update(MessageToDict(response.status_update.metadata))
            hop = _hop(response.status_update.status.message.metadata)
            if self.streaming and response.status_update.status.state == TaskState.TASK_STATE_WORKING and hop:
                self.end_line()
                print(f"-> {hop.get('agent')}  ({hop.get('reason')})", flush=True)
        elif kind == "artifact_update":
            update = response.artifact_update
            if self.task is not None and update.last_chunk:  # a hop's whole reply, not its chunks
                self.task.artifacts.append(update.artifact)
            if self.streaming:
                self.grow(update.artifact, append=update.append, last=update.last_chunk)

    def grow(self, artifact: Artifact, *, append: bool, last: bool) -> None:
        """Show an artifact's text: a new line for a new artifact, the rest of the same line for
        more of the one being streamed (`append`: a chunk to add; else its text so far, whole)."""
        text = text_of(Message(parts=artifact.parts))
        same = bool(self.growing) and artifact.artifact_id == self.growing
        whole = self.shown + text if same and append else text
        if same and whole.startswith(self.shown):
            sys.stdout.write(whole[len(self.shown) :])
        else:  # another artifact, or a text that replaces what was shown
            self.end_line()
            sys.stdout.write(f"   {artifact.name or 'reply'}: {whole}")
        self.growing, self.shown = artifact.artifact_id, whole
        if last:
            self.end_line()
        sys.stdout.flush()

    def end_line(self) -> None:
        """Close the growing line, if one is open."""
        if self.growing:
            sys.stdout.write("\n")
            sys.stdout.flush()
            self.growing, self.shown = "", ""

    def finish(self) -> int:
        if self.reply is not None:
            print(text_of(self.reply))
            _print_decision(self.reply)
            if self.trace_id:
                print(f"trace {self.trace_id}", file=sys.stderr)
            return 0
        if self.task is None:
            print("error: the server sent no task and no message", file=sys.stderr)
            return 1
        task = self.task
        state = state_name(task.status.state)
        text = text_of(task.status.message) if task.status.HasField("message") else ""
        if self.streaming:
            print()
        print(text, file=sys.stderr if task.status.state == FAILED else sys.stdout)
        _print_route(task)
        trace = f" | trace {self.trace_id}" if self.trace_id else ""
        print(f"task {task.id} | context {task.context_id} | {state}{trace}")
        if task.status.state == INPUT_REQUIRED:
            print(f'answer with: ranch send <target> "..." --context {task.context_id}')
        return 0 if task.status.state in (COMPLETED, INPUT_REQUIRED) else 1


def _hop(metadata: Any) -> dict[str, Any] | None:
    data = MessageToDict(metadata).get(keys.HOP)
    return data if isinstance(data, dict) else None


def _print_decision(message: Message) -> None:
    decision = client_routing.read_decision(message)
    if decision is not None:
        print(f"route: {decision.recipient}" + (f" ({decision.reason})" if decision.reason else ""))


def _print_route(task: Task) -> None:
    data = MessageToDict(task.metadata).get(client_routing.URI, {})
    trail = data.get("trail") if isinstance(data, dict) else None
    if not trail:
        return
    print(
        "\nroute: " + " -> ".join(["user", *(_stop(hop) for hop in trail)]) + f" -> {trail[-1]['recipient']}"
    )
    _print_hops(trail, "  ")
    usage = data.get("usage")
    if isinstance(usage, dict) and "totalTokens" in usage:
        spent = ", ".join(f"{hop['agent']} {hop['tokens']:g}" for hop in trail if "tokens" in hop)
        print(f"tokens: {usage['totalTokens']:g} ({spent})")


def _stop(hop: dict[str, Any]) -> str:
    """A hop in the route line: its agent, and the hops inside it when it is a team."""
    inside = hop.get("trail")
    if not inside:
        return str(hop["agent"])
    return f"{hop['agent']} [{' -> '.join(_stop(step) for step in inside)}]"


def _print_hops(trail: list[dict[str, Any]], indent: str) -> None:
    for index, hop in enumerate(trail, 1):
        loop = "  (loop)" if hop.get("loop") else ""
        loop += f"  {hop['tokens']:g} tokens" if "tokens" in hop else ""
        print(
            f"{indent}{index:>2}. {hop['agent']:<12} from {hop['sender']:<12} -> {hop['recipient']:<12}"
            f" {hop['reason']:<28} {hop['ms']:.1f} ms{loop}"
        )
        if hop.get("trail"):
            _print_hops(hop["trail"], indent + "      ")
