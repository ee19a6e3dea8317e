"""The input rules of limits.py as pydantic types, for the hub API's request bodies and frames.

A body is parsed by a model (`Body`: an unknown field is refused, naming it); its fields use these
types, so every entry keeps the same rules: text holds no control characters (`limits.CONTROL`),
chosen names match the config's id pattern, ids and counts fit their columns, integers are
integers (never `true` or `"5"`).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, Strict, StringConstraints
from pydantic_core import PydanticCustomError

from ranch.config import ID_PATTERN, RESERVED_IDS
from ranch.policy.limits import CONTROL, MAX_INT

MAX_ID_LENGTH = 64
"""The longest id the hub's tables hold (their id columns are VARCHAR(64))."""
MAX_HISTORY_LENGTH = 2**31 - 1
"""The largest `history_length` the agents table holds (a 32-bit column)."""


class Body(BaseModel):
    """A request body or a WebSocket frame: an unknown field is refused, naming it."""

    model_config = ConfigDict(extra="forbid")

    def given(self, field: str) -> bool:
        """Whether the caller sent `field` (a PATCH changes only those)."""
        return field in self.model_fields_set


def plain(value: str) -> str:
    """Refuse text with a control character (limits.py's rule), naming the code point."""
    found = CONTROL.search(value)
    if found is not None:
        raise PydanticCustomError(
            "control_character",
            "contains the control character U+{code} at index {index}; only TAB, LF and CR are allowed",
            {"code": f"{ord(found.group()):04X}", "index": found.start()},
        )
    return value


def filled(value: str) -> str:
    """Refuse text with nothing in it but whitespace."""
    if not value.strip():
        raise PydanticCustomError("blank", "must be a non-empty string")
    return value


def _not_reserved(value: str) -> str:
    if value in RESERVED_IDS:
        raise PydanticCustomError("reserved", "'{value}' is reserved for routing", {"value": value})
    return value


def no_dot(value: str) -> str:
    """Refuse a chosen name holding a dot, which only ever separates an organization's prefix."""
    if "." in value:
        raise PydanticCustomError("dotted", "must not contain '.' (it separates an organization's prefix)")
    return value


Text = Annotated[str, AfterValidator(plain)]
"""Any text without control characters."""
Filled = Annotated[str, AfterValidator(filled), AfterValidator(plain)]
"""Text with something in it besides whitespace."""
Title = Annotated[str, Field(max_length=300), AfterValidator(plain)]
Label = Annotated[str, Field(max_length=200), AfterValidator(plain)]
"""A display name, perhaps empty (the tables hold 200 characters)."""
Name = Annotated[Label, AfterValidator(filled)]
"""A display name with something in it."""
Slug = Annotated[
    str, StringConstraints(pattern=ID_PATTERN, max_length=MAX_ID_LENGTH), AfterValidator(_not_reserved)
]
"""A chosen id of a user, agent, team or organization: `[a-z0-9][a-z0-9_-]*`, at most 64 characters."""
RoomName = Annotated[str, Field(max_length=MAX_ID_LENGTH), AfterValidator(no_dot), AfterValidator(plain)]
"""A chosen room id: at most 64 characters, no dot, no control characters."""
Ref = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH), AfterValidator(plain)]
"""An id as a caller names something: in full, or an organization's short name for its own."""
Count = Annotated[int, Strict(), Field(ge=0, le=MAX_INT)]
"""A whole number from 0 to 2^63-1 (cursors and counts are signed 64-bit in the database)."""
HistoryLength = Annotated[int, Strict(), Field(ge=0, le=MAX_HISTORY_LENGTH)]
UrlPrefix = Annotated[str, StringConstraints(pattern=r"^https?://"), AfterValidator(plain)]
