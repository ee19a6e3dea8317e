"""Hub errors as HTTP: one status per error class, one body shape."""

from __future__ import annotations

from starlette.responses import JSONResponse

from ranch.exceptions import (
    Conflict,
    Forbidden,
    HubError,
    InvalidInput,
    NotFound,
    Unauthenticated,
    Unprocessable,
)

STATUS: dict[type[HubError], int] = {
    InvalidInput: 400,
    Unauthenticated: 401,
    Forbidden: 403,
    NotFound: 404,
    Conflict: 409,
    Unprocessable: 422,
}


def body(code: str, message: str, field: str | None = None) -> dict[str, dict[str, str | None]]:
    return {"error": {"code": code, "message": message, "field": field}}


def status_of(exc: HubError) -> int:
    for kind in type(exc).__mro__:
        if kind in STATUS:
            return STATUS[kind]
    return 400


def response(exc: HubError) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="ranch"'} if isinstance(exc, Unauthenticated) else None
    return JSONResponse(body(exc.code, str(exc), exc.field), status_code=status_of(exc), headers=headers)
