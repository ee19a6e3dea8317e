"""ranch: teams of A2A agents, local or remote, that route work to each other.

Everything a user writes against is importable from here (`from ranch import Agent, reply`);
the subpackages hold the implementation and may change. `import ranch` stays cheap: the
config models and the server (`create_app`, `Settings`) load on first use.
"""

import importlib
import typing

from ranch._version import __version__
from ranch.agents.base import Agent, AgentInfo, Call, Event, reply, text_of
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
from ranch.routing.team import Team
from ranch.wire.client_routing import URI as CLIENT_ROUTING_URI
from ranch.wire.client_routing import RoutingDecision, RoutingRequest, SimplifiedAgentCard
from ranch.wire.client_routing import read_request as read_routing_request

if typing.TYPE_CHECKING:
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

_LAZY = {
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
"""Public names whose modules load on first use: the server pulls in Starlette, SQLAlchemy, uvicorn and
the whole hub (about 2 s of CPU); the config brings PyYAML and builds its validators."""


if not typing.TYPE_CHECKING:  # type checkers read the imports above; an unknown name stays an error

    def __getattr__(name: str) -> typing.Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'ranch' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
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
