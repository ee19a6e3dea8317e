"""A refused input as one `InvalidInput` naming the field at fault, the same on both sides.

The hub answers a body or frame its request model refuses with it; `ranch.client` raises it before
sending when the same model refuses the call's arguments. The field is spelled as docs/api.md spells
it (`rules[0].match`, `participants[1].kind`), with pydantic's reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from ranch.exceptions import InvalidInput

TAG_ERRORS = frozenset({"union_tag_invalid", "union_tag_not_found"})
"""A tagged union's tag (`kind`, `type`) is missing or names no member."""


def invalid_input(exc: ValidationError, value: Any) -> InvalidInput:
    """The first problem pydantic found in `value`, naming its field (None: the whole input)."""
    error = exc.errors(include_url=False)[0]
    if error["type"] in TAG_ERRORS:
        tag = str(error.get("ctx", {}).get("discriminator", "")).strip("'")
        expected = str(error.get("ctx", {}).get("expected_tags", "")).replace("'", "")
        field = spelled([*fields_of(error["loc"], value), tag])
        why = f"must be one of {expected}" if expected else "is missing"
        return InvalidInput(f"{field} {why}", field)
    where = spelled(fields_of(error["loc"], value))
    return InvalidInput(f"{where}: {_reason(error)}" if where else _reason(error), where or None)


def fields_of(loc: Sequence[int | str], value: Any) -> list[int | str]:
    """`loc` without the parts pydantic adds that are no field: a tagged union's tag (`rules` in
    `rules.rules.0`), a union member's name (`str`, `RemoteToolConfig`). A name is a field where
    the input has it, or where it is the last part (a missing field)."""
    path: list[int | str] = []
    for index, part in enumerate(loc):
        if isinstance(part, int):
            path.append(part)
            value = value[part] if isinstance(value, list) and -len(value) <= part < len(value) else None
        elif isinstance(value, dict) and (part in value or index == len(loc) - 1):
            path.append(part)
            value = value.get(part)
    return path


def spelled(path: Sequence[int | str]) -> str:
    """`["rules", 0, "match"]` as `rules[0].match`."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else part
    return text


def _reason(error: ErrorDetails) -> str:
    return error["msg"].removeprefix("Value error, ")
