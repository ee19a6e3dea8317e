"""Errors ranch answers before a request reaches the SDK's bindings, in each binding's format.

JSON-RPC endpoints (`POST /a2a/agents/{id}`) get a JSON-RPC error object; the
HTTP+JSON routes get the `{"error": {code, status, message}}` shape the a2a-sdk
uses. Codes: A2A's own where one fits, else ranch's (-32050..-32069, see docs/errors.md).
"""

from __future__ import annotations

import re
from typing import Any

JSONRPC_PATH = re.compile(r"^/a2a/agents/[^/]+/?$")

# kind -> (JSON-RPC code, HTTP status, gRPC-style status)
CODES: dict[str, tuple[int, int, str]] = {
    "agent_not_found": (-32050, 404, "NOT_FOUND"),
    "payload_too_large": (-32600, 413, "INVALID_ARGUMENT"),
}


def is_jsonrpc(path: str) -> bool:
    return JSONRPC_PATH.match(path) is not None


def error_body(path: str, kind: str, message: str, request_id: Any = None) -> dict[str, Any]:
    code, status, grpc_status = CODES[kind]
    if is_jsonrpc(path):
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return {"error": {"code": status, "status": grpc_status, "message": message}}


def http_status(kind: str) -> int:
    return CODES[kind][1]
