"""Agents for handoff tests: one that hands its first message's work to another agent of the room.

    - id: lead
      kind: python
      entry: _support.handoffs:Handing
      options: {to: helper, reason: "needs a specialist", done: true}

Its first turn in a room answers "handing over to <to>" with `metadata[client-routing].handoff` naming `to`
(and `ask`, when given, as the handoff's own message); every later turn answers
"<id> got: <text>", marked `ranch.done` with `done`; so does a first turn on a message from one of
`answers` (a result reaching an agent that restarted). Whatever reaches it is kept in `SEEN[id]`.

`handing_peer(to)` serves the same idea as a remote A2A agent built with the a2a-sdk alone.
"""

from __future__ import annotations

import contextlib
import uuid
from collections import defaultdict
from collections.abc import AsyncGenerator, Iterator
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import Message, Part, Role
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

from _support.peers import peer_card
from _support.servers import ServerThread, bind_socket
from ranch import Call, Event, reply, text_of
from ranch.wire import client_routing
from ranch.wire.keys import DONE, MESSAGE

SEEN: defaultdict[str, list[Message]] = defaultdict(list)


class Handing:
    """Hands over on its first turn, answers on the others (see the module docstring)."""

    def __init__(self, agent_id: str, **options: Any) -> None:
        self.name = agent_id
        self.options = options
        self.turns: defaultdict[str, int] = defaultdict(int)
        """Turns taken, per room (context)."""

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        kept = Message()
        kept.CopyFrom(message)
        SEEN[self.name].append(kept)
        self.turns[message.context_id] += 1
        to = self.options.get("to")
        sender = MessageToDict(message.metadata).get(MESSAGE, {}).get("sender", {}).get("id")
        if self.turns[message.context_id] == 1 and to and sender not in self.options.get("answers", []):
            answer = reply(message, f"handing over to {to}")
            handoff = client_routing.Handoff(
                agent=str(to), reason=str(self.options.get("reason", "")), message=self.options.get("ask")
            )
            yield client_routing.attach_handoff(answer, handoff)
            return
        answer = reply(message, f"{self.name} got: {text_of(message)}")
        if self.options.get("done"):
            answer.metadata.update({DONE: True})
        yield answer


class HandingExecutor(AgentExecutor):
    """An A2A agent built with the a2a-sdk alone: on its first message in a context it answers with a
    client-routing `handoff` to `to`; later, "peer got: <text>". It records what reaches it."""

    def __init__(self, to: str) -> None:
        self.to = to
        self.seen: list[Message] = []

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        self.seen.append(context.message)
        first = sum(m.context_id == context.context_id for m in self.seen) == 1
        answer = Message(
            role=Role.ROLE_AGENT,
            message_id=uuid.uuid4().hex,
            context_id=context.context_id or "",
            parts=[Part(text=f"over to {self.to}" if first else f"peer got: {text_of(context.message)}")],
        )
        if first:
            client_routing.attach_handoff(answer, client_routing.Handoff(agent=self.to, reason="not mine"))
        await event_queue.enqueue_event(answer)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("answers at once")


@contextlib.contextmanager
def handing_peer(to: str) -> Iterator[tuple[str, HandingExecutor]]:
    """Serve a `HandingExecutor` on 127.0.0.1: its URL and the executor."""
    sock = bind_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    card = peer_card("handing", base_url=url, name="Handing peer", routing=True)
    executor = HandingExecutor(to)
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/")]
    with ServerThread(Starlette(routes=routes), sock=sock, name="handing-peer"):
        yield url, executor
