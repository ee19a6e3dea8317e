"""Client-routing v1 for the OpenAI Agents SDK: an `Agent` served over A2A whose handoffs reach its peers.

A router (a ranch team, or any orchestrator speaking docs/extension/client-routing-v1.md) sends its
peers' cards in `message.metadata[URI]` and follows the `recipient` the agent answers. The Agents
SDK already has that idea, in process: a handoff. This module serves an `Agent` with the a2a-sdk
(1.x) and maps the two onto each other. It does not import ranch: copy it.

    from openai_agents import AgentsExecutor, declare, routing_app

    agent = Agent(name="help desk", instructions="...", model=...)
    app = routing_app(AgentsExecutor(agent), declare(my_card))     # serve with uvicorn

For each request whose caller negotiated the extension, the agent runs as a clone with more handoffs:

- each offered peer becomes a handoff named `transfer_to_<peer id>`, described by the peer's card;
  when the model takes it, the run stops at once (`RunResultStreaming.cancel(mode="after_turn")`:
  the peer runs elsewhere, not in this process) and the reply carries `recipient: <peer id>`;
- when an agent handed the work over (`sender` is not `user`), `transfer_back_to_sender` does the
  same with `recipient: sender`;
- an answer that ends the run (the final output, perhaps after the agent's own in-process handoffs)
  carries `recipient: user`;
- on the last hop (`hopsRemaining: 1`) no peer handoff is offered: the agent can only answer.

Each handoff takes a `reason`, which becomes the decision's `reason`; the run's token usage is
reported as `usage`. The agent's own handoffs (other `Agent`s in this process) work as before.
Without the extension negotiated the agent runs unchanged and its answer names no recipient.
The reply is one A2A Message (text). `ActivationHeader` lists the URI in the response's
`A2A-Extensions` header (the a2a-sdk 1.x server has no API for it; `routing_app` installs it).

Run `python openai_agents.py --port 9003 --model-url http://127.0.0.1:8080/v1 --model gpt-4o-mini`
for a demo help desk on any OpenAI-compatible chat completions server (`OPENAI_API_KEY`).
"""

from __future__ import annotations

import argparse
import contextvars
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Message,
    Part,
    Role,
)
from google.protobuf.json_format import MessageToDict
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

from agents import Agent, Handoff, ItemHelpers, RunConfig, RunContextWrapper, Runner, handoff

URI = "https://ranch.woi.dev/extensions/client-routing/v1"

_activated: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("a2a_activated", default=None)


class HandoffReason(BaseModel):
    """What the model gives when it hands over: the decision's `reason`."""

    reason: str


@dataclass
class Choice:
    """Who the model handed over to in this run (None: nobody, it answered)."""

    recipient: str | None = None
    reason: str = ""


def peer_handoffs(request: dict[str, Any], owner: Agent[Any], choice: Choice) -> list[Handoff[Any, Any]]:
    """A handoff per peer offered in `request` (and one back to the sender); taking one records it in
    `choice`.

    Each targets a stand-in `Agent` named after the recipient, which never runs (the executor stops
    the run at the handoff); it has the owner's model so that, were it ever run, no other provider is
    called."""
    if request.get("hopsRemaining") == 1:
        return []
    targets = [
        (str(card["id"]), f"transfer_to_{_tool_name(str(card['id']))}", _about(card))
        for card in request.get("agentCards") or []
        if isinstance(card, dict) and isinstance(card.get("id"), str)
    ]
    sender = request.get("sender")
    if isinstance(sender, str) and sender != "user":
        targets.append(
            ("sender", "transfer_back_to_sender", f"Give the work back to {sender}, who handed it to you.")
        )
    return [_handoff(recipient, tool, about, owner, choice) for recipient, tool, about in targets]


def _handoff(recipient: str, tool: str, about: str, owner: Agent[Any], choice: Choice) -> Handoff[Any, Any]:
    async def record(_context: RunContextWrapper[Any], given: HandoffReason) -> None:
        choice.recipient, choice.reason = recipient, given.reason

    stand_in = Agent[Any](name=recipient, handoff_description=about, model=owner.model)
    return handoff(
        stand_in,
        tool_name_override=tool,
        tool_description_override=about,
        on_handoff=record,
        input_type=HandoffReason,
    )


def _tool_name(peer_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", peer_id)[:48]


def _about(card: dict[str, Any]) -> str:
    skills = ", ".join(str(c) for c in card.get("capabilities") or [])
    about = f"Hand the conversation over to {card.get('name') or card['id']}: {card.get('description') or ''}"
    return about + (f" (skills: {skills})" if skills else "")


class AgentsExecutor(AgentExecutor):
    """An Agents SDK `Agent` as an a2a-sdk executor: one run per message, answered with a Message."""

    def __init__(self, agent: Agent[Any], run_config: RunConfig | None = None, max_turns: int = 10) -> None:
        self.agent, self.run_config, self.max_turns = agent, run_config, max_turns

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        request = routing_request(context)
        choice = Choice()
        agent = self.agent
        if request is not None:
            agent = agent.clone(handoffs=[*agent.handoffs, *peer_handoffs(request, agent, choice)])
        result = Runner.run_streamed(
            agent, context.get_user_input(), run_config=self.run_config, max_turns=self.max_turns
        )
        async for _event in result.stream_events():
            if choice.recipient is not None:  # a peer takes over: end the run after this turn
                result.cancel(mode="after_turn")
        said = ItemHelpers.text_message_outputs(result.new_items)
        if choice.recipient is None and result.final_output is not None:
            said = str(result.final_output)
        reply = Message(
            role=Role.ROLE_AGENT,
            message_id=str(uuid.uuid4()),
            context_id=context.context_id or "",
            parts=[Part(text=said or f"Handing over to {choice.recipient}: {choice.reason}")],
        )
        if request is not None:
            decision: dict[str, Any] = {
                "recipient": choice.recipient or "user",
                "reason": choice.reason or "answered",
            }
            usage = result.context_wrapper.usage
            if usage.total_tokens:  # a model that streams without usage reports none, not zero
                counts = (usage.input_tokens, usage.output_tokens, usage.total_tokens)
                decision["usage"] = dict(
                    zip(("inputTokens", "outputTokens", "totalTokens"), counts, strict=True)
                )
            reply.metadata.update({URI: decision})
            reply.extensions.append(URI)
        await event_queue.enqueue_event(reply)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise NotImplementedError("a run answers with one Message; there is no task to cancel")


# -- A2A plumbing (the same as a2a_sdk.py's, so that this file stands alone) -----------------------


def routing_request(context: RequestContext) -> dict[str, Any] | None:
    """The request data, when the caller negotiated the extension (reading it activates it)."""
    if URI not in context.requested_extensions or context.message is None:
        return None
    data = MessageToDict(context.message.metadata).get(URI)
    if not isinstance(data, dict):
        return None
    activated = _activated.get()
    if activated is not None:
        activated.add(URI)
    return data


class ActivationHeader:
    """ASGI middleware: lists the extensions activated while serving a request in its response's
    `A2A-Extensions` header."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        activated: set[str] = set()
        token = _activated.set(activated)

        async def send_listing(message: AsgiMessage) -> None:
            if message["type"] == "http.response.start" and activated:
                listed = (b"a2a-extensions", ", ".join(sorted(activated)).encode())
                message = {**message, "headers": [*message.get("headers", []), listed]}
            await send(message)

        try:
            await self.app(scope, receive, send_listing)
        finally:
            _activated.reset(token)


def declare(card: AgentCard, required: bool = False) -> AgentCard:
    """`card`, its `capabilities.extensions` listing the extension."""
    if all(extension.uri != URI for extension in card.capabilities.extensions):
        description = "Receives its peers' cards in message metadata and answers with the next recipient."
        card.capabilities.extensions.append(
            AgentExtension(uri=URI, description=description, required=required)
        )
    return card


def routing_app(executor: AgentExecutor, card: AgentCard) -> Starlette:
    """`executor` served as the a2a-sdk serves any agent (card, JSON-RPC at `/`, HTTP+JSON), plus
    `ActivationHeader`."""
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    routes = [
        *create_agent_card_routes(card),
        *create_jsonrpc_routes(handler, rpc_url="/"),
        *create_rest_routes(handler, path_prefix=""),
    ]
    return Starlette(routes=routes, middleware=[Middleware(ActivationHeader)])


# -- the demo --------------------------------------------------------------------------------------


def demo_card(url: str) -> AgentCard:
    return declare(
        AgentCard(
            name="help desk",
            description="Takes every question; hands each to the peer that handles it.",
            version="1.0.0",
            supported_interfaces=[
                AgentInterface(protocol_binding="JSONRPC", protocol_version="1.0", url=f"{url}/"),
                AgentInterface(protocol_binding="HTTP+JSON", protocol_version="1.0", url=url),
            ],
            capabilities=AgentCapabilities(streaming=False),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[
                AgentSkill(id="triage", name="triage", description="Answers or hands over.", tags=["triage"])
            ],
        )
    )


def main() -> None:
    import uvicorn
    from openai import AsyncOpenAI

    from agents import ModelSettings, OpenAIChatCompletionsModel, set_tracing_disabled

    parser = argparse.ArgumentParser(description="Serve the demo Agents SDK help desk on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=9003)
    parser.add_argument("--model-url", required=True, help="an OpenAI-compatible base URL, ending in /v1")
    parser.add_argument("--model", default="gpt-4o-mini")
    args = parser.parse_args()
    set_tracing_disabled(True)  # the demo exports no traces anywhere
    client = AsyncOpenAI(base_url=args.model_url, api_key=os.environ.get("OPENAI_API_KEY", "local"))
    agent = Agent[Any](
        name="help desk",
        instructions="You are a help desk. Answer briefly; hand work you cannot do to the peer that can.",
        model=OpenAIChatCompletionsModel(model=args.model, openai_client=client),
        model_settings=ModelSettings(include_usage=True),  # streamed answers report their tokens too
    )
    app = routing_app(AgentsExecutor(agent), demo_card(f"http://127.0.0.1:{args.port}"))
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
