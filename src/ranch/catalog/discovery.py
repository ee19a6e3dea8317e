"""Agents found by what they can do: the `skill`, `tag` and `mode` filters of every agent list.

One rule for the three lists (`GET /a2a/agents`, `GET /api/v1/agents`, the `/mcp` tool list),
applied after the caller's visibility: an agent matches when it matches every filter given.

- `skill`: a skill whose id or name contains it (case-insensitive);
- `tag`: a skill with that tag (case-insensitive);
- `mode`: a media type the agent's card lists for input or output, its own or a skill's;
  `image/*` matches `image/png`, and a listed `*/*` matches any.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from a2a.types import AgentSkill
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from ranch.agents.base import AgentInfo
from ranch.exceptions import InvalidInput
from ranch.policy.fields import filled, plain
from ranch.wire.cards import default_skill
from ranch.wire.modes import takes

FILTERS = ("skill", "tag", "mode")
MAX_FILTER_CHARS = 200


Filter = Annotated[str, Field(max_length=MAX_FILTER_CHARS), AfterValidator(filled), AfterValidator(plain)]
"""One filter's text: something besides whitespace, at most MAX_FILTER_CHARS, no control characters."""


class Wanted(BaseModel):
    """`?skill=&tag=&mode=`: only the agents whose served cards match every filter given
    (docs/api.md, "Finding agents"); none given matches every agent."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    skill: Filter | None = None
    """A skill whose id or name contains it (case-insensitive)."""
    tag: Filter | None = None
    """A skill with this tag (case-insensitive)."""
    mode: Filter | None = None
    """A media type the card lists for input or output (`image/*` matches `image/png`)."""

    @property
    def given(self) -> bool:
        return self.skill is not None or self.tag is not None or self.mode is not None

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> Wanted:
        """The filters of a query string; InvalidInput naming the parameter for a bad one."""
        try:
            return cls.model_validate({name: query[name] for name in FILTERS if name in query})
        except ValidationError as exc:
            error = exc.errors()[0]
            name = str(error["loc"][0]) if error["loc"] else "query"
            raise InvalidInput(f"{name}: {error['msg']}", name) from exc

    def matches(self, info: AgentInfo) -> bool:
        skills = card_skills(info)
        if self.skill is not None:
            wanted = self.skill.casefold()
            if not any(wanted in skill.id.casefold() or wanted in skill.name.casefold() for skill in skills):
                return False
        if self.tag is not None:
            wanted = self.tag.casefold()
            if not any(wanted == tag.casefold() for skill in skills for tag in skill.tags):
                return False
        return self.mode is None or any(_same_type(self.mode, listed) for listed in modes(info))


def card_skills(info: AgentInfo) -> list[AgentSkill]:
    """The skills `info`'s served card lists: its own, or the one a card without skills gets."""
    return list(info.skills) or [default_skill(info.id, info.name, info.description)]


def modes(info: AgentInfo) -> list[str]:
    """The media types `info`'s card lists: the card's own input and output modes and its skills'."""
    listed = [*info.input_modes, *info.output_modes]
    for skill in card_skills(info):
        listed.extend(skill.input_modes)
        listed.extend(skill.output_modes)
    return listed


def _same_type(wanted: str, listed: str) -> bool:
    """A filter and a listed mode match when either takes the other (`image/*` finds `image/png`,
    and a card listing `image/*` or `*/*` is found by `image/png`)."""
    return takes(listed, wanted) or takes(wanted, listed)
