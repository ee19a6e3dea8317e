"""The hub's errors as exception classes: one per error code family of docs/errors.md.

Every error answer of the hub is `{"error": {"code", "message", "field"}}`; the client raises
the class its `code` belongs to, carrying the code, the message, the field at fault, the HTTP
status and (for 429) how long to wait.
"""

from __future__ import annotations

from typing import Any


class HubError(Exception):
    """An error answer from the hub (or no answer at all: `status` 0)."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "",
        field: str | None = None,
        status: int = 0,
        retry_after: float = 0,
    ) -> None:
        self.message, self.code, self.field, self.status = message, code, field, status
        self.retry_after = retry_after
        """Seconds the hub asked to wait (429), else 0."""
        super().__init__(f"{code}: {message}" if code else message)


class Unreachable(HubError):
    """No answer: the connection failed or timed out."""


class InvalidInput(HubError):
    """400: a field is missing or has a bad value (`field` names it)."""


class Unauthenticated(HubError):
    """401: no key, or an unknown, revoked, expired key (or session)."""


class PermissionDenied(HubError):
    """403: the key may not do this."""


class NotFound(HubError):
    """404: no such thing the key may see."""


class Conflict(HubError):
    """409: an id taken, a room closed, a delivery answered already."""


class PayloadTooLarge(HubError):
    """413: a message or a body over the hub's limit."""


class UnsupportedContent(HubError):
    """415: a part of a media type the agent does not take."""


class Unprocessable(HubError):
    """422: well-formed but refused (a card that cannot be read, a URL not allowed, a routing error)."""


class RateLimited(HubError):
    """429: too many requests; `retry_after` says when to try again."""


class Unavailable(HubError):
    """502, 503, 504: an agent or the store is not answering, or an agent answered wrongly."""


class ServerError(HubError):
    """500: the hub failed; its log has the details."""


BY_CODE: dict[str, type[HubError]] = {
    "INVALID_PARAMS": InvalidInput,
    "UNSAFE_URL": InvalidInput,
    "UNAUTHENTICATED": Unauthenticated,
    "SESSION_EXPIRED": Unauthenticated,
    "PERMISSION_DENIED": PermissionDenied,
    "NOT_FOUND": NotFound,
    "AGENT_NOT_FOUND": NotFound,
    "TASK_NOT_FOUND": NotFound,
    "CONFLICT": Conflict,
    "PAYLOAD_TOO_LARGE": PayloadTooLarge,
    "REQUEST_TOO_LARGE": PayloadTooLarge,
    "CONTENT_TYPE_NOT_SUPPORTED": UnsupportedContent,
    "UNPROCESSABLE": Unprocessable,
    "RATE_LIMITED": RateLimited,
    "AGENT_UNAVAILABLE": Unavailable,
    "STORE_UNAVAILABLE": Unavailable,
    "AGENT_TIMEOUT": Unavailable,
    "AGENT_ERROR": Unavailable,
    "INVALID_AGENT_RESPONSE": Unavailable,
    "INVALID_RECIPIENT": Unprocessable,
    "HOP_LIMIT_EXCEEDED": Unprocessable,
    "PARSE_ERROR": InvalidInput,
    "INTERNAL_ERROR": ServerError,
}
BY_STATUS: dict[int, type[HubError]] = {
    400: InvalidInput,
    401: Unauthenticated,
    403: PermissionDenied,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    415: UnsupportedContent,
    422: Unprocessable,
    429: RateLimited,
    500: ServerError,
    502: Unavailable,
    503: Unavailable,
    504: Unavailable,
}


def from_answer(status: int, body: Any, retry_after: float = 0) -> HubError:
    """The exception for an error answer (its JSON `body`, or whatever came)."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return BY_STATUS.get(status, HubError)(f"HTTP {status}", status=status, retry_after=retry_after)
    code = str(error.get("code", ""))
    cls = BY_CODE.get(code) or BY_STATUS.get(status, HubError)
    field = error.get("field")
    return cls(
        str(error.get("message", "")),
        code=code,
        field=field if isinstance(field, str) else None,
        status=status,
        retry_after=retry_after,
    )
