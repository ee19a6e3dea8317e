"""The extended card a caller gets from `GetExtendedAgentCard` (every binding, behind `--auth keys`).

The public card says what anyone may see; the extended one is the card as this caller may use it:
the same skills and interfaces (a caller reaching the agent may use every skill it lists: ranch keeps
no per-skill grants), and, in the `caller` extension, who the hub takes the caller for and the rate
limits that apply to their calls (docs/api.md, "Finding agents").
"""

from __future__ import annotations

from a2a.types import AgentCard, AgentExtension
from google.protobuf.struct_pb2 import Struct

from ranch.agents.base import Agent
from ranch.catalog.cards import served_card
from ranch.identity.principal import Principal
from ranch.policy.ratelimit import Rate
from ranch.wire.cards import declare_security

CALLER_URI = "https://ranch.woi.dev/extensions/caller/v1"
"""The extension an extended card carries: the caller, and the rate limits their calls are under."""


async def extended_card(
    agent: Agent,
    base_url: str,
    principal: Principal | None,
    rates: tuple[Rate | None, Rate | None],
    *,
    grpc: str | None = None,
) -> AgentCard:
    """`agent`'s served card, marked extended, with the caller and their rate limits."""
    card = declare_security(await served_card(agent, base_url, grpc=grpc))
    card.capabilities.extended_agent_card = True
    caller_rate, agent_rate = rates
    params = Struct()
    params.update(
        {
            "caller": None
            if principal is None
            else {"id": principal.id, "kind": principal.kind, "organization": principal.org_id},
            "rateLimits": {
                "perCaller": _rate(caller_rate),
                "perAgent": _rate(agent_rate),
            },
        }
    )
    card.capabilities.extensions.append(
        AgentExtension(
            uri=CALLER_URI,
            description="Who this hub takes the caller for, and the rate limits of their calls.",
            required=False,
            params=params,
        )
    )
    return card


def _rate(rate: Rate | None) -> dict[str, float] | None:
    """A token bucket as `perSecond` refilled, `burst` at most; None when unlimited."""
    return None if rate is None else {"perSecond": rate.per_second, "burst": rate.burst}
