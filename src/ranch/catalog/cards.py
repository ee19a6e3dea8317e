"""The cards a hub serves for its agents and teams (wire/cards.py builds them)."""

from __future__ import annotations

from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from a2a.utils.constants import TransportProtocol

from ranch._version import __version__
from ranch.agents.base import Agent
from ranch.wire.cards import build_card

TENANTS_PATH = "/a2a"
"""One endpoint for every agent: JSON-RPC at POST /a2a (`params.tenant` names the agent), HTTP+JSON
at /a2a/{tenant}/... (A2A 1.0 multi-tenancy), beside the per-agent URLs (`edge/guards.py` routes it)."""

CARD_FILE = ".well-known/agent-card.json"
API_CARDS_PATH = "/api/v1/agents"
"""Seed 003's option B: /api/v1/agents/{id}/.well-known/agent-card.json, the same card as option A."""
WELL_KNOWN_AGENTS_PATH = "/.well-known/a2a/agents"
"""Seed 003's option C: /.well-known/a2a/agents/{id}.json, the same card as option A."""
HUB_CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
"""The hub's own card (a pointer to its catalog), or `--root`'s agent's card."""
CATALOG_PATH = "/.well-known/ai-catalog.json"
"""The AI catalog (ARD draft): every agent and team the caller may see."""


def card_paths(base_url: str, agent_id: str) -> dict[str, str]:
    """The URLs of one agent's card: options A (the one cards name), B and C of seed 003."""
    base = base_url.rstrip("/")
    return {
        "a": f"{base}/a2a/agents/{agent_id}/{CARD_FILE}",
        "b": f"{base}{API_CARDS_PATH}/{agent_id}/{CARD_FILE}",
        "c": f"{base}{WELL_KNOWN_AGENTS_PATH}/{agent_id}.json",
    }


def hub_card(base_url: str) -> AgentCard:
    """The hub's own card at /.well-known/agent-card.json (no `--root`): where its agents are found.

    Its interfaces are the one endpoint for every agent (`/a2a`, a call names its `tenant`)."""
    base = base_url.rstrip("/")
    catalog = f"{base}{CATALOG_PATH}"
    return AgentCard(
        name="ranch hub",
        description=(
            f"An A2A hub of agents and teams. Its catalog: {catalog}; each agent's card: "
            f"{base}/a2a/agents/{{id}}/{CARD_FILE}; calls to {base}{TENANTS_PATH} name the agent as `tenant`."
        ),
        version=__version__,
        supported_interfaces=[
            AgentInterface(url=f"{base}{TENANTS_PATH}", protocol_binding=binding, protocol_version="1.0")
            for binding in (TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value)
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        documentation_url=catalog,
        skills=[
            AgentSkill(
                id="catalog",
                name="Agent catalog",
                description=f"Lists the agents and teams of this hub at {catalog} and {base}/a2a/agents.",
                tags=["catalog", "discovery"],
            )
        ],
    )


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
