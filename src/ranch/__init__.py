"""ranch: teams of A2A agents, local or remote, that route work to each other.

Everything a user writes against is importable from here (`from ranch import Agent, reply`);
the subpackages hold the implementation and may change. `import ranch` stays cheap: all
but the exceptions and `__version__` load on first use.
"""

import importlib
import typing

from ranch._version import __version__
from ranch.exceptions import (
    AgentError,
    AgentNotFound,
    AgentTimeout,
    AgentUnavailable,
    BodyTooLarge,
    ConfigError,
    Conflict,
    ExtensionSupportRequired,
    Forbidden,
    HopLimitExceeded,
    InvalidAgentReply,
    InvalidInput,
    InvalidRecipient,
    NotFound,
    PayloadTooLarge,
    PolicyError,
    RanchError,
    RateLimited,
    ReplyTooLarge,
    RoutingError,
    SessionExpired,
    StoreUnavailable,
    ToolError,
    Unauthorized,
    Unprocessable,
    UnsafeUrl,
)

if typing.TYPE_CHECKING:
    from ranch.agents.base import Agent, AgentInfo, Call, Event, reply, text_of
    from ranch.config import (
        AgentConfig,
        EchoAgentConfig,
        LlmAgentConfig,
        PythonAgentConfig,
        RanchConfig,
        RemoteAgentConfig,
        RuleConfig,
        RulesAgentConfig,
        SkillConfig,
        TeamConfig,
        load_config,
        parse_config,
    )
    from ranch.hub.app import Settings, create_app
    from ranch.routing.team import Team
    from ranch.wire.client_routing import URI as CLIENT_ROUTING_URI
    from ranch.wire.client_routing import RoutingDecision, RoutingRequest, SimplifiedAgentCard
    from ranch.wire.client_routing import read_request as read_routing_request

_LAZY = {
    **dict.fromkeys(("Agent", "AgentInfo", "Call", "Event", "reply", "text_of"), "ranch.agents.base"),
    "Team": "ranch.routing.team",
    **dict.fromkeys(
        ("RoutingDecision", "RoutingRequest", "SimplifiedAgentCard"), "ranch.wire.client_routing"
    ),
    "CLIENT_ROUTING_URI": "ranch.wire.client_routing:URI",
    "read_routing_request": "ranch.wire.client_routing:read_request",
    **dict.fromkeys(("create_app", "Settings"), "ranch.hub.app"),
    **dict.fromkeys(
        (
            "AgentConfig",
            "EchoAgentConfig",
            "LlmAgentConfig",
            "PythonAgentConfig",
            "RanchConfig",
            "RemoteAgentConfig",
            "RuleConfig",
            "RulesAgentConfig",
            "SkillConfig",
            "TeamConfig",
            "load_config",
            "parse_config",
        ),
        "ranch.config",
    ),
}
"""Public names whose modules load on first use (`module` or `module:attribute`): the server pulls in
Starlette, SQLAlchemy, uvicorn and the whole hub (about 2 s of CPU); the config brings PyYAML and builds
its validators; the agent, team and routing types bring the A2A SDK's protobufs and the tracing (about
0.3 s), which `ranch --help` and `ranch.cli` do without."""


if not typing.TYPE_CHECKING:  # type checkers read the imports above; an unknown name stays an error

    def __getattr__(name: str) -> typing.Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'ranch' has no attribute {name!r}")
        module, _, attribute = module.partition(":")
        value = getattr(importlib.import_module(module), attribute or name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "Agent",
    "AgentConfig",
    "AgentError",
    "AgentInfo",
    "AgentNotFound",
    "AgentTimeout",
    "AgentUnavailable",
    "BodyTooLarge",
    "CLIENT_ROUTING_URI",
    "Call",
    "ConfigError",
    "Conflict",
    "EchoAgentConfig",
    "Event",
    "ExtensionSupportRequired",
    "Forbidden",
    "HopLimitExceeded",
    "InvalidAgentReply",
    "InvalidInput",
    "InvalidRecipient",
    "LlmAgentConfig",
    "NotFound",
    "PayloadTooLarge",
    "PolicyError",
    "PythonAgentConfig",
    "RanchConfig",
    "RanchError",
    "RateLimited",
    "RemoteAgentConfig",
    "ReplyTooLarge",
    "RoutingDecision",
    "RoutingError",
    "RoutingRequest",
    "RuleConfig",
    "RulesAgentConfig",
    "SessionExpired",
    "Settings",
    "SimplifiedAgentCard",
    "SkillConfig",
    "StoreUnavailable",
    "Team",
    "TeamConfig",
    "ToolError",
    "Unauthorized",
    "Unprocessable",
    "UnsafeUrl",
    "__version__",
    "create_app",
    "load_config",
    "parse_config",
    "read_routing_request",
    "reply",
    "text_of",
]
