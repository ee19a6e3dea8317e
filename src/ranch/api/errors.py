"""Errors as REST and WebSocket answers, from the one table of wire/errors.py (docs/errors.md).

A body or frame that a request model refuses becomes one `InvalidInput` naming the field at fault
as docs/api.md spells it (`rules[0].match`, `participants[1].kind`), with pydantic's reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from pydantic_core import ErrorDetails
from starlette.responses import JSONResponse

from ranch.exceptions import InvalidInput
from ranch.observe import metrics
from ranch.wire.errors import headers_for, http_status_for, rest_error_body

M = TypeVar("M")

TAG_ERRORS = frozenset({"union_tag_invalid", "union_tag_not_found"})
"""A tagged union's tag (`kind`, `type`) is missing or names no member."""


def body(exc: BaseException, *, debug: bool = False) -> dict[str, Any]:
    """`{"error": {"code", "message", "field"}}`: `field` names the input at fault, or is null."""
    return rest_error_body(exc, debug=debug)


def response(exc: BaseException, *, debug: bool = False) -> JSONResponse:
    """`exc` as a REST answer, with its headers (`Retry-After`, a 401's challenge)."""
    metrics.error(type(exc).__name__)
    return JSONResponse(body(exc, debug=debug), status_code=http_status_for(exc), headers=headers_for(exc))


def parsed(adapter: TypeAdapter[M], value: Any) -> M:
    """`value` (decoded JSON) as `adapter`'s type; InvalidInput naming the field at fault."""
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        raise invalid_input(exc, value) from None


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
