"""Errors as REST and WebSocket answers, from the one table of wire/errors.py (docs/errors.md).

A body or frame that a request model refuses becomes one `InvalidInput` naming the field at fault
(`ranch.protocol.invalid`, which `ranch.client` shares).
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import TypeAdapter, ValidationError
from starlette.responses import JSONResponse

from ranch.observe import metrics
from ranch.protocol.invalid import invalid_input
from ranch.wire.errors import headers_for, http_status_for, rest_error_body

M = TypeVar("M")


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
