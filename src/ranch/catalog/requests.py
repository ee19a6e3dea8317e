"""What an organization registers over REST (`POST /api/v1/agents`): the config file's entries.

A registration is the config file's model for its kind (`ranch.config`), so the API and the file
share every rule, plus who may use the agent (`visibility`) and the `tools` it lists; an
`external` agent (no A2A server, it reads its messages over the API) is only that. The union is
tagged by `kind`; `python` agents come from the config file only. What needs the database or
the network (is the id free, are the members usable, is a URL allowed) is checked by
`records.register`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, cast

from pydantic import Field, TypeAdapter, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError, ValidationError

from ranch.config import EchoAgentConfig, LlmAgentConfig, RemoteAgentConfig, RulesAgentConfig, TeamConfig
from ranch.policy.fields import Body, HistoryLength, Slug, Text
from ranch.protocol.vocabulary import Visibility
from ranch.wire.client_routing import USER


class _Registration(Body):
    """What a registration adds to a config entry, and the limits the agents table sets."""

    id: Slug
    """The name chosen; another organization's agent gets its prefix (`<org>.<id>`)."""
    history_length: HistoryLength | None = None
    visibility: Visibility = Visibility.ORG
    """`global` (every organization) is the server superuser's to give."""
    tools: list[Text] = Field(default_factory=list)
    """Shown in listings."""


class RegisterRules(_Registration, RulesAgentConfig):
    """Rules whose `match` regexes run on RE2 (linear time; no lookarounds or backreferences)."""


class RegisterEcho(_Registration, EchoAgentConfig):
    pass


class RegisterRemote(_Registration, RemoteAgentConfig):
    """An A2A agent by URL: its card is fetched, validated and cached for `card_ttl` seconds."""


class RegisterLlm(_Registration, LlmAgentConfig):
    """A model behind an OpenAI-compatible API; its key is read from `api_key_env`, never stored."""

    @field_validator("api_key", mode="before")
    @classmethod
    def _no_key(cls, value: Any) -> Any:
        raise PydanticCustomError(
            "stored_key",
            "the hub does not store keys: give api_key_env, naming an environment variable of the server",
        )


def _refuse(model: str, field: str, value: Any, message: str) -> ValidationError:
    """A validation error naming `field`, for a rule over several fields."""
    detail = InitErrorDetails(type=PydanticCustomError("team", message), loc=(field,), input=value)
    return ValidationError.from_exception_data(model, [detail])


class RegisterTeam(_Registration, TeamConfig):
    """Members by id (an organization's own by their short names); checked as the config file's."""

    kind: Literal["team"]
    """Not part of a team's config entry (the file lists teams apart)."""

    @model_validator(mode="after")
    def _members_agree(self) -> RegisterTeam:
        if len(set(self.members)) != len(self.members):
            raise _refuse(type(self).__name__, "members", self.members, "a member is listed twice")
        if self.default_agent not in self.members:
            message = f"'{self.default_agent}' is not a member"
            raise _refuse(type(self).__name__, "default_agent", self.default_agent, message)
        for source, target in self.routes.items():
            if source not in self.members or target not in (*self.members, USER):
                message = f"route '{source}' -> '{target}' names a non-member"
                raise _refuse(type(self).__name__, "routes", self.routes, message)
        return self


class RegisterExternal(_Registration):
    """An agent with no A2A server: it brings its own model and reads its messages over the API."""

    kind: Literal["external"]
    name: str | None = None
    description: str = ""
    model: str | None = None
    """Shown in listings."""


Registration = Annotated[
    RegisterRemote | RegisterExternal | RegisterRules | RegisterEcho | RegisterLlm | RegisterTeam,
    Field(discriminator="kind"),
]
REGISTRATION: TypeAdapter[Registration] = TypeAdapter(cast(Any, Registration))  # an Annotated union
"""Parses a registration body; errors carry the kind as their first location (the union's tag)."""
