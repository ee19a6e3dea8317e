"""Errors as REST and WebSocket answers, from the one table of wire/errors.py (docs/errors.md)."""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from ranch.wire.errors import headers_for, http_status_for, rest_error_body


def body(exc: BaseException, *, debug: bool = False) -> dict[str, Any]:
    """`{"error": {"code", "message", "field"}}`: `field` names the input at fault, or is null."""
    return rest_error_body(exc, debug=debug)


def response(exc: BaseException, *, debug: bool = False) -> JSONResponse:
    """`exc` as a REST answer, with its headers (`Retry-After`, a 401's challenge)."""
    return JSONResponse(body(exc, debug=debug), status_code=http_status_for(exc), headers=headers_for(exc))
