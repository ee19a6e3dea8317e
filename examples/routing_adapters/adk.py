"""Client-routing v1 for Google ADK agents served with `to_a2a`: the model sees its peers and picks one.

A router (a ranch team, or any orchestrator speaking docs/extension/client-routing-v1.md) sends its
peers' cards in `message.metadata[URI]` and follows the `recipient` the agent answers. With this
module an ADK `LlmAgent` takes part: add `RoutingToolset()` to its tools and serve it with
`routing_app`. It needs google-adk 2.13 with a2a-sdk 1.x, and does not import ranch: copy it.

    from adk import RoutingToolset, routing_app, routing_card

    agent = LlmAgent(name="help_desk", model=..., instruction="...", tools=[..., RoutingToolset()])
    card = asyncio.run(routing_card(agent, "http://127.0.0.1:9002"))  # to_a2a's card, declaring it
    app = routing_app(agent, card)  # to_a2a(agent, ...), routing-aware

What happens on a request whose caller negotiated the extension:

1. the executor's request converter (`A2aAgentExecutorConfig.request_converter`) puts the request
   data in the session state (`REQUEST`), and clears the last request's decision;
2. `RoutingToolset` then shows the model who its peers are (an instruction appended to the LLM
   request) and gives it a `route_to(recipient, reason)` tool whose `recipient` is an enum of this
   request's choices (`user`, `sender` when someone handed the work over, the peers' ids); the tool
   refuses anything else, and on the last hop (`hopsRemaining: 1`) offers only `user`;
3. the tool writes the decision to the session state (`DECISION`), and an `after_agent`
   interceptor (`ExecuteInterceptor`) puts it on the final status event: its message, if it has
   one, and its `metadata`, which the a2a-sdk merges into the task's metadata (where a router
   reads it: ADK puts the reply text in an artifact, with no status message);
4. `ActivationHeader` lists the URI in the response's `A2A-Extensions` header.

Without the extension negotiated the agent has no `route_to` and hears nothing of peers. If the
model answers without calling `route_to`, the answer carries no decision and the router decides.

All of it is ADK's public API (`to_a2a`'s `agent_card` and `agent_executor_factory`,
`A2aAgentExecutorConfig`, `ExecuteInterceptor`, `BaseToolset`, `BaseTool`), all marked experimental
by ADK; the Makefile pins google-adk to 2.13.x for that reason.

Run `python adk.py --port 9002 --model-url http://127.0.0.1:8080/v1 --model gpt-4o-mini` for a demo
help desk on any OpenAI-compatible chat completions server (ADK's `OpenAILlm`; `OPENAI_API_KEY`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import os
from typing import Any

from a2a.server.agent_execution import RequestContext
from a2a.types import AgentCapabilities, AgentCard, AgentExtension, TaskState, TaskStatusUpdateEvent
from google.adk.a2a.converters.part_converter import A2APartToGenAIPartConverter
from google.adk.a2a.converters.request_converter import (
    AgentRunRequest,
    convert_a2a_request_to_agent_run_request,
)
from google.adk.a2a.executor.a2a_agent_executor import A2aAgentExecutor
from google.adk.a2a.executor.config import A2aAgentExecutorConfig, ExecuteInterceptor
from google.adk.a2a.executor.executor_context import ExecutorContext
from google.adk.a2a.utils.agent_card_builder import AgentCardBuilder
from google.adk.a2a.utils.agent_to_a2a import to_a2a
from google.adk.agents import LlmAgent
from google.adk.agents.readonly_context import ReadonlyContext
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.runners import Runner
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.base_toolset import BaseToolset
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as AsgiMessage

URI = "https://ranch.woi.dev/extensions/client-routing/v1"
REQUEST = "client_routing_request"
"""Session state: this request's data (None when the caller did not negotiate the extension)."""
DECISION = "client_routing_decision"
"""Session state: what `route_to` chose for this request."""

_activated: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("a2a_activated", default=None)


# -- what the model sees and calls -----------------------------------------------------------------


def choices(request: dict[str, Any]) -> list[str]:
    """Who may act next: the user, the sender (when an agent handed the work over), the offered peers;
    on the last hop, only the user."""
    if request.get("hopsRemaining") == 1:
        return ["user"]
    sender = ["sender"] if request.get("sender") not in (None, "user") else []
    peers = [str(card["id"]) for card in request.get("agentCards") or [] if isinstance(card, dict)]
    return ["user", *sender, *peers]


def instruction(request: dict[str, Any]) -> str:
    """The peers, in words, for the model: appended to the agent's own instruction."""
    lines = ["You are one agent of a team. Answer, then call route_to to say who acts next:"]
    lines.append('- "user": your answer goes back to the user')
    if "sender" in choices(request):
        lines.append(f'- "sender": give the work back to {request["sender"]}, who handed it to you')
    for card in request.get("agentCards") or []:
        if card.get("id") in choices(request):
            skills = ", ".join(card.get("capabilities") or [])
            about = f"{card.get('name')}: {card.get('description', '')}" + (
                f" (skills: {skills})" if skills else ""
            )
            lines.append(f'- "{card["id"]}": {about}')
    if request.get("hopsRemaining") == 1:
        lines.append("This is the last hop of the turn: nobody else can act, answer the user.")
    return "\n".join(lines)


class RouteTo(BaseTool):
    """`route_to(recipient, reason)`: records the decision in the session state for this request."""

    def __init__(self, request: dict[str, Any]) -> None:
        super().__init__(name="route_to", description="Say who acts next: the user, the sender or a peer.")
        self.request = request

    def _get_declaration(self) -> types.FunctionDeclaration:
        schema = {
            "type": "object",
            "properties": {
                "recipient": {"type": "string", "enum": choices(self.request)},
                "reason": {"type": "string", "description": "why, in a few words"},
            },
            "required": ["recipient", "reason"],
        }
        return types.FunctionDeclaration(
            name=self.name, description=self.description, parameters_json_schema=schema
        )

    async def run_async(self, *, args: dict[str, Any], tool_context: ToolContext) -> dict[str, str]:
        recipient = str(args.get("recipient", "")).strip()
        if recipient not in choices(self.request):
            return {"error": f"{recipient!r} cannot act next; choose one of {choices(self.request)}"}
        tool_context.state[DECISION] = {"recipient": recipient, "reason": str(args.get("reason") or "")}
        return {"ok": f"{recipient} acts next"}


class RoutingToolset(BaseToolset):
    """Put in an `LlmAgent`'s tools: when the caller routes, the peers in the instruction and `route_to`."""

    async def get_tools(self, readonly_context: ReadonlyContext | None = None) -> list[BaseTool]:
        request = readonly_context.state.get(REQUEST) if readonly_context is not None else None
        return [RouteTo(request)] if isinstance(request, dict) else []

    async def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> None:
        request = tool_context.state.get(REQUEST)
        if isinstance(request, dict):
            llm_request.append_instructions([instruction(request)])


# -- the A2A side: request data in, decision out ---------------------------------------------------


def with_routing_request(
    context: RequestContext, part_converter: A2APartToGenAIPartConverter
) -> AgentRunRequest:
    """ADK's own request conversion, plus this request's routing data in the session state."""
    run_request = convert_a2a_request_to_agent_run_request(context, part_converter)
    request = None
    if URI in context.requested_extensions and context.message is not None:
        data = MessageToDict(context.message.metadata).get(URI)
        request = data if isinstance(data, dict) else None
    if request is not None:
        activate(URI)
    run_request.state_delta = {**(run_request.state_delta or {}), REQUEST: request, DECISION: None}
    return run_request


async def stamp_decision(context: ExecutorContext, event: TaskStatusUpdateEvent) -> TaskStatusUpdateEvent:
    """The `after_agent` interceptor: the decision `route_to` recorded, on the final status event."""
    session = await context.runner.session_service.get_session(
        app_name=context.app_name, user_id=context.user_id, session_id=context.session_id
    )
    decision = session.state.get(DECISION) if session is not None else None
    if isinstance(decision, dict) and event.status.state == TaskState.TASK_STATE_COMPLETED:
        event.metadata.update({URI: decision})
        if event.status.HasField("message"):
            event.status.message.metadata.update({URI: decision})
            event.status.message.extensions.append(URI)
    return event


def executor_config() -> A2aAgentExecutorConfig:
    return A2aAgentExecutorConfig(
        request_converter=with_routing_request,
        execute_interceptors=[ExecuteInterceptor(after_agent=stamp_decision)],
    )


def activate(uri: str) -> None:
    activated = _activated.get()
    if activated is not None:
        activated.add(uri)


class ActivationHeader:
    """ASGI middleware: lists the extensions `activate`d while serving a request in its response's
    `A2A-Extensions` header (the a2a-sdk 1.x server, and so ADK, has no API for it)."""

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


async def routing_card(agent: LlmAgent, url: str) -> AgentCard:
    """The card `to_a2a` would build for `agent` at `url`, declaring the extension."""
    declared = AgentExtension(
        uri=URI, description="Receives its peers' cards and answers with the next recipient.", required=False
    )
    capabilities = AgentCapabilities(streaming=True, extensions=[declared])
    return await AgentCardBuilder(agent=agent, rpc_url=f"{url}/", capabilities=capabilities).build()


def routing_app(agent: LlmAgent, card: AgentCard, **to_a2a_options: Any) -> Starlette:
    """`to_a2a(agent, ...)` with the routing executor config and the activation header."""

    def executor(runner: Runner) -> A2aAgentExecutor:
        return A2aAgentExecutor(runner=runner, config=executor_config())

    app = to_a2a(agent, agent_card=card, agent_executor_factory=executor, **to_a2a_options)
    app.add_middleware(ActivationHeader)
    return app


# -- the demo --------------------------------------------------------------------------------------


def demo_agent(model: BaseLlm | str) -> LlmAgent:
    return LlmAgent(
        name="help_desk",
        description="Takes every question; hands each to the peer that handles it.",
        model=model,
        instruction="You are a help desk. Answer briefly; hand work you cannot do to the peer that can.",
        tools=[RoutingToolset()],
    )


def main() -> None:
    import uvicorn
    from google.adk.integrations.openai import OpenAILlm

    parser = argparse.ArgumentParser(description="Serve the demo ADK help desk on 127.0.0.1.")
    parser.add_argument("--port", type=int, default=9002)
    parser.add_argument("--model-url", required=True, help="an OpenAI-compatible base URL, ending in /v1")
    parser.add_argument("--model", default="gpt-4o-mini")
    args = parser.parse_args()
    model = OpenAILlm(
        model=args.model, base_url=args.model_url, api_key=os.environ.get("OPENAI_API_KEY", "local")
    )
    agent = demo_agent(model)
    url = f"http://127.0.0.1:{args.port}"
    card = asyncio.run(routing_card(agent, url))
    uvicorn.run(routing_app(agent, card), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
