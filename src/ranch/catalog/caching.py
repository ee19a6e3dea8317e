"""HTTP caching of what discovery serves: cards and the AI catalog (A2A 1.0.1's discovery guidance).

Every card and catalog response carries `Cache-Control` (max-age from `card_ttl`'s default, the
seconds ranch itself trusts a card), an `ETag` (a hash of the JSON exactly as served, so it changes
when the agent's config, skills or modes change, and is the same on every replica serving the same
config) and `Last-Modified`; a request whose `If-None-Match` names the current ETag gets 304.
"""

from __future__ import annotations

import hashlib
import json
import time
from email.utils import formatdate
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

CARD_MAX_AGE = 300
"""Seconds a client may keep a served card: the default `card_ttl` of a remote agent (config.py)."""
_SEEN_LIMIT = 10_000

_first_seen: dict[str, float] = {}
"""ETag -> when this process first served it: the `Last-Modified` of that version."""


def cached_json(
    request: Request, content: Any, *, private: bool, version: Any = None, max_age: int = CARD_MAX_AGE
) -> Response:
    """`content` as JSON with cache headers, or 304 when the request's `If-None-Match` names its ETag.

    `private`: the answer depends on the caller (keys are checked), so shared caches must not keep it.
    `version`: what the ETag hashes when it is not `content` itself (a signed card: ECDSA signatures
    differ on every signing, the card they sign does not)."""
    body = _dumps(content)
    etag = f'"{hashlib.sha256(body if version is None else _dumps(version)).hexdigest()[:32]}"'
    headers = {
        "Cache-Control": f"{'private' if private else 'public'}, max-age={max_age}",
        "ETag": etag,
        "Last-Modified": formatdate(_modified(etag), usegmt=True),
    }
    if private:
        headers["Vary"] = "Authorization, X-API-Key"
    if _matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def _dumps(content: Any) -> bytes:
    return json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode()


def _modified(etag: str) -> float:
    seen = _first_seen.get(etag)
    if seen is None:
        if len(_first_seen) >= _SEEN_LIMIT:
            _first_seen.clear()
        seen = _first_seen[etag] = time.time()
    return seen


def _matches(header: str | None, etag: str) -> bool:
    """RFC 9110 weak comparison: `*`, or any listed tag equal to `etag` with or without `W/`."""
    if header is None:
        return False
    tags = [tag.strip().removeprefix("W/") for tag in header.split(",")]
    return "*" in tags or etag in tags
