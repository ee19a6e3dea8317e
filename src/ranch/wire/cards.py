"""Agent cards for what ranch serves: interfaces at the surface.md layout, extensions declared."""

from __future__ import annotations

from collections.abc import Sequence

from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    APIKeySecurityScheme,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from a2a.utils.constants import TransportProtocol

from ranch.wire.modes import TEXT

AGENTS_PATH = "/a2a/agents"
VERSIONS = ("1.0", "0.3")
API_KEY_SCHEME = "apiKey"
BEARER_SCHEME = "bearer"


def agent_url(base_url: str, agent_id: str) -> str:
    """Where an agent's JSON-RPC endpoint and HTTP+JSON routes live."""
    return f"{base_url.rstrip('/')}{AGENTS_PATH}/{agent_id}"


def build_card(
    *,
    agent_id: str,
    name: str,
    description: str,
    skills: Sequence[AgentSkill],
    extensions: Sequence[AgentExtension],
    base_url: str,
    version: str,
    required: Sequence[str] = (),
    streaming: bool = True,
    push_notifications: bool = True,
    url: str | None = None,
    input_modes: Sequence[str] = (TEXT,),
    output_modes: Sequence[str] = (TEXT,),
) -> AgentCard:
    """The card of one served agent or team.

    `supportedInterfaces` lists JSON-RPC and HTTP+JSON for A2A 1.0 and 0.3 at the
    same URL (a request without `A2A-Version` is served as 0.3): `url`, else the
    agent's place under /a2a/agents. Extensions the agent requires are declared with
    `required: true`.
    """
    url = url or agent_url(base_url, agent_id)
    declared = [_with_required(ext, ext.uri in required) for ext in extensions]
    known = {ext.uri for ext in declared}
    declared += [AgentExtension(uri=uri, required=True) for uri in required if uri not in known]
    return AgentCard(
        name=name,
        description=description or name,
        version=version,
        provider=AgentProvider(organization="ranch", url=base_url.rstrip("/")),
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=binding, protocol_version=v)
            for v in VERSIONS
            for binding in (TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value)
        ],
        capabilities=AgentCapabilities(
            streaming=streaming, push_notifications=push_notifications, extensions=declared
        ),
        default_input_modes=list(input_modes),
        default_output_modes=list(output_modes),
        skills=list(skills) or [default_skill(agent_id, name, description)],
    )


def _with_required(ext: AgentExtension, required: bool) -> AgentExtension:
    copy = AgentExtension()
    copy.CopyFrom(ext)
    copy.required = copy.required or required
    return copy


def declare_security(card: AgentCard) -> AgentCard:
    """Declare the hub's API keys: in `X-API-Key`, or as `Authorization: Bearer <key>` (either one)."""
    about = "a ranch API key (docs/api.md)"
    card.security_schemes[API_KEY_SCHEME].CopyFrom(
        SecurityScheme(
            api_key_security_scheme=APIKeySecurityScheme(
                location="header", name="X-API-Key", description=about
            )
        )
    )
    card.security_schemes[BEARER_SCHEME].CopyFrom(
        SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer", bearer_format="ranch API key", description=about
            )
        )
    )
    del card.security_requirements[:]
    for name in (API_KEY_SCHEME, BEARER_SCHEME):
        card.security_requirements.append(SecurityRequirement(schemes={name: StringList()}))
    return card


def default_skill(agent_id: str, name: str, description: str = "") -> AgentSkill:
    """The skill a card lists for an agent that declares none: itself, tagged with its id."""
    return AgentSkill(id=agent_id, name=name, description=description or name, tags=[agent_id])
