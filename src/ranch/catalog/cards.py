"""The cards a hub serves for its agents and teams (wire/cards.py builds them)."""

from __future__ import annotations

from a2a.types import AgentCard, AgentInterface
from a2a.utils.constants import TransportProtocol

from ranch._version import __version__
from ranch.agents.base import Agent
from ranch.wire.cards import build_card

TENANTS_PATH = "/a2a"
"""One endpoint for every agent: JSON-RPC at POST /a2a (`params.tenant` names the agent), HTTP+JSON
at /a2a/{tenant}/... (A2A 1.0 multi-tenancy), beside the per-agent URLs (`edge/guards.py` routes it)."""


async def served_card(
    agent: Agent, base_url: str, url: str | None = None, *, grpc: str | None = None, tenants: bool = True
) -> AgentCard:
    """The card this server serves for `agent` at /a2a/agents/{id} (or at `url`, for `--root`).

    Agents that answer at once with one Message (`replies_directly`) never create a task,
    so their cards do not offer push notifications. After the agent's own URL come the one
    endpoint for every agent, /a2a, with the agent's id as its `tenant` (A2A 1.0 only: 0.3 has
    no tenants; not on `--root`'s card, `tenants=False`: a client of one agent looks at the root), and
    `grpc`, the gRPC server's `host:port`, with the same tenant.
    """
    info = await agent.info()
    card = build_card(
        agent_id=agent.id,
        name=info.name,
        description=info.description,
        skills=info.skills,
        extensions=info.extensions,
        base_url=base_url,
        version=__version__,
        required=agent.require_extensions,
        streaming=True,
        push_notifications=not agent.replies_directly,
        url=url,
        input_modes=info.input_modes,
        output_modes=info.output_modes,
    )
    for binding in (TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value) if tenants else ():
        card.supported_interfaces.append(
            AgentInterface(
                url=f"{base_url.rstrip('/')}{TENANTS_PATH}",
                protocol_binding=binding,
                protocol_version="1.0",
                tenant=agent.id,
            )
        )
    if grpc is not None:
        card.supported_interfaces.append(
            AgentInterface(
                url=grpc,
                protocol_binding=TransportProtocol.GRPC.value,
                protocol_version="1.0",
                tenant=agent.id,
            )
        )
    return card
