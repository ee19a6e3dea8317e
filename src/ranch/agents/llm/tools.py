"""The functions an llm agent offers its model, and how each call is answered.

- every tool of the agent's MCP servers, under the tool's own name (the first
  server to offer a name keeps it);
- `call_remote_agent(agent, message)` when remote agents are configured;
- `route_to(recipient, reason)` when the Router sent peers: `recipient` is an
  enum of the peer ids plus `user` and `sender`. Its call is the routing
  decision; it is answered at once and never reaches a tool server.
- `hand_off(agent, reason, message)` when the message comes from a room: another
  agent of the room takes the work over, and this agent is woken with its result
  (docs/routing.md, "Handoffs in rooms"). Answered at once, like `route_to`.

A server that cannot be reached is left out of that model call (its tools come
back when it answers again); one whose address the URL guard refused (a
tenant's agent pointing inward) ends the turn, naming the server and the reason.

Arguments are parsed and checked against the function's JSON schema first; a
problem goes back to the model as an error result so it can correct the call.
"""

from __future__ import annotations

import json
import logging
from contextlib import AsyncExitStack
from typing import Any

from ranch.agents.llm.mcp import McpServer, ToolResult, schema_error
from ranch.agents.llm.remote_tool import NAME as CALL_REMOTE
from ranch.agents.llm.remote_tool import RemoteAgentTool
from ranch.exceptions import AgentUnavailable, ToolError
from ranch.policy.egress import refused
from ranch.wire import client_routing

logger = logging.getLogger(__name__)

ROUTE_TO = "route_to"
HAND_OFF = "hand_off"
RESERVED = frozenset({ROUTE_TO, HAND_OFF, CALL_REMOTE})


class Toolbox:
    """One agent's tools: its MCP servers, the remote-agent tool, and `route_to`."""

    def __init__(self, owner: str, servers: list[McpServer], remote: RemoteAgentTool | None) -> None:
        self.owner = owner
        self.servers = servers
        self.remote = remote
        self._stack = AsyncExitStack()
        self._owners: dict[str, McpServer] = {}
        self._schemas: dict[str, dict[str, Any]] = {}

    async def open(self) -> None:
        for server in self.servers:
            await self._stack.enter_async_context(server)

    async def aclose(self) -> None:
        await self._stack.aclose()

    async def specs(
        self, routing: client_routing.RoutingRequest | None, *, in_room: bool = False
    ) -> list[dict[str, Any]]:
        """The function definitions for one model call (tool lists are cached per server)."""
        specs: list[dict[str, Any]] = []
        for server in self.servers:
            try:
                tools = await server.list_tools()
            except ToolError as exc:  # the model works without that server's tools this time
                if refused(exc) is not None:  # ... unless the guard refused it: that will not pass
                    raise AgentUnavailable(
                        self.owner, f"{exc}; an organization's agents may not call it"
                    ) from exc
                logger.warning("agent %s: %s", self.owner, exc)
                continue
            for tool in tools:
                owner = self._owners.setdefault(tool.name, server)
                if tool.name in RESERVED or owner is not server:
                    logger.warning("agent %s: tool name '%s' is taken; skipped", self.owner, tool.name)
                    continue
                self._schemas[tool.name] = tool.input_schema
                function = {
                    "name": tool.name,
                    "description": tool.description or "",
                    "parameters": tool.input_schema,
                }
                specs.append({"type": "function", "function": function})
        if self.remote is not None and self.remote.allowed:
            specs.append(self.remote.spec())
        if routing is not None:
            specs.append(route_to_spec(routing))
        if in_room:
            specs.append(HAND_OFF_SPEC)
        return specs

    async def call(self, name: str, arguments: str, context_id: str, owner: str = "") -> ToolResult:
        """Run one tool call the model asked for; every problem is an error result, not an exception."""
        parsed = parse_arguments(arguments)
        if isinstance(parsed, ToolResult):
            return parsed
        if name == CALL_REMOTE and self.remote is not None:
            problem = schema_error(self.remote.spec()["function"]["parameters"], parsed)  # type: ignore[index]
            if problem is not None:
                return ToolResult(f"invalid arguments for {CALL_REMOTE}: {problem}", is_error=True)
            return await self.remote.call(str(parsed["agent"]), str(parsed["message"]), context_id, owner)
        server = self._owners.get(name)
        if server is None:
            return ToolResult(f"there is no tool named '{name}'", is_error=True)
        return await server.call_tool(name, parsed)


def route_to_spec(routing: client_routing.RoutingRequest) -> dict[str, Any]:
    peers = [card.id for card in routing.agent_cards]
    return {
        "type": "function",
        "function": {
            "name": ROUTE_TO,
            "description": (
                "Choose who acts next: a peer's id, 'user' to answer the user, or 'sender' to answer "
                f"whoever sent you this message ({routing.sender}). Write your message for them as well."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "recipient": {
                        "type": "string",
                        "enum": [*peers, client_routing.USER, client_routing.SENDER],
                    },
                    "reason": {"type": "string", "description": "why, in a few words"},
                },
                "required": ["recipient", "reason"],
                "additionalProperties": False,
            },
        },
    }


def route(
    arguments: str, routing: client_routing.RoutingRequest | None
) -> tuple[ToolResult, client_routing.RoutingDecision | None]:
    """Answer a `route_to` call: the decision it makes, or an error result for the model."""
    if routing is None:
        return ToolResult("route_to is not available: you are not part of a team turn", is_error=True), None
    spec = route_to_spec(routing)
    parsed = parse_arguments(arguments)
    if isinstance(parsed, ToolResult):
        return parsed, None
    problem = schema_error(spec["function"]["parameters"], parsed)
    if problem is not None:
        return ToolResult(f"invalid arguments for {ROUTE_TO}: {problem}", is_error=True), None
    decision = client_routing.RoutingDecision(
        recipient=parsed["recipient"], reason=parsed.get("reason") or None
    )
    return ToolResult(f"Your reply will go to '{decision.recipient}'."), decision


HAND_OFF_SPEC: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": HAND_OFF,
        "description": (
            "Hand this work over to another agent of the room (by its id, as it is @mentioned there): "
            "it takes the work, and you are woken with its result to carry on. End your turn after it."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "agent": {
                    "type": "string",
                    "minLength": 1,
                    "description": "the id of another agent of the room",
                },
                "reason": {"type": "string", "description": "why, in a few words"},
                "message": {"type": "string", "description": "what you ask of it"},
            },
            "required": ["agent", "reason", "message"],
            "additionalProperties": False,
        },
    },
}


def hand_off(arguments: str, in_room: bool) -> tuple[ToolResult, client_routing.Handoff | None]:
    """Answer a `hand_off` call: the handoff it asks for, or an error result for the model."""
    if not in_room:
        return ToolResult(
            "hand_off is not available: this message does not come from a room", is_error=True
        ), None
    parsed = parse_arguments(arguments)
    if isinstance(parsed, ToolResult):
        return parsed, None
    problem = schema_error(HAND_OFF_SPEC["function"]["parameters"], parsed)
    if problem is not None:
        return ToolResult(f"invalid arguments for {HAND_OFF}: {problem}", is_error=True), None
    handoff = client_routing.Handoff(
        agent=parsed["agent"].strip(), reason=parsed["reason"], message=parsed["message"] or None
    )
    return ToolResult(f"'{handoff.agent}' takes the work over; you will be woken with its result."), handoff


def parse_arguments(arguments: str) -> dict[str, Any] | ToolResult:
    """The model's argument text as an object, or an error result saying why it is not one."""
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return ToolResult(f"the arguments are not valid JSON: {exc}", is_error=True)
    if not isinstance(parsed, dict):
        return ToolResult("the arguments must be a JSON object", is_error=True)
    return parsed
