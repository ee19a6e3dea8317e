"""`GET /extensions/client-routing/v1/schema.json`: the extension's schema document, served.

Apart from `routing_schema` so that reading routing data (every client that names the extension)
loads no web framework.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ranch.exceptions import InvalidInput
from ranch.wire.errors import http_status_for, rest_error_body
from ranch.wire.routing_schema import PARTS, SCHEMA_PATH, published

__all__ = ["SCHEMA_PATH", "endpoint"]


async def endpoint(request: Request) -> Response:
    """`GET SCHEMA_PATH[?part=request|response]`: the document, public like a card (no key)."""
    part = request.query_params.get("part")
    if part is not None and part not in PARTS:
        error = InvalidInput(
            f"part must be 'request' or 'response' (or left out for both), not {part!r}", "part"
        )
        return JSONResponse(rest_error_body(error), status_code=http_status_for(error))
    return JSONResponse(
        published(part if part in PARTS else None),
        media_type="application/schema+json",
        headers={"Cache-Control": "public, max-age=3600"},
    )
