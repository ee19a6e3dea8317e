"""The OpenAPI 3.1 document of /api/v1, made from the route table and its models.

Every operation of api/routes.py `OPERATIONS` is a path item with its parameters, its request
body (the model it parses), its answer (the model it answers, by pydantic's JSON schemas) and
the errors it may give, all in the one error shape. Served at `GET /api/v1/openapi.json`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

import orjson
from pydantic import BaseModel, TypeAdapter

from ranch._version import __version__
from ranch.api.models import ErrorBody
from ranch.api.operations import Operation
from ranch.db.models import ParticipantKind

PATH = "/openapi.json"
"""Where the document is served, under the API's prefix."""
REF = "#/components/schemas/{model}"
ERROR = "ErrorBody"
"""The one error shape (api/models.py `ErrorBody`), every error answer's schema."""
PARAMETER = re.compile(r"\{(\w+)\}")
PARAMETERS: dict[str, dict[str, Any]] = {
    "kind": {"type": "string", "enum": [kind.value for kind in ParticipantKind]},
    "index": {"type": "integer", "minimum": 0},
}
"""Path parameters that are not free strings."""
ERRORS = {
    400: "INVALID_PARAMS: a body that is not JSON, or a field with a wrong value or type (`field` names it)",
    401: "UNAUTHENTICATED: no key, or an unknown, revoked or expired key",
    403: "PERMISSION_DENIED: the caller may not do this",
    404: "NOT_FOUND: no such thing, or another organization's",
    409: "CONFLICT: an id already taken, a room that is closed, an execution that already ended",
    413: "PAYLOAD_TOO_LARGE or REQUEST_TOO_LARGE: a message or a body over the server's limit",
    415: "CONTENT_TYPE_NOT_SUPPORTED: a part of a media type an agent it wakes does not take",
    422: "UNPROCESSABLE: well-formed but refused (an unreadable card, a URL not allowed)",
    429: "RATE_LIMITED: too many requests; Retry-After says when to retry",
    503: "SERVER_BUSY: the server is at a limit of concurrent work; Retry-After says when to retry",
}


def document(operations: Sequence[Operation], prefix: str) -> dict[str, Any]:
    """The OpenAPI 3.1 document of `operations`, served under `prefix`."""
    inputs: list[tuple[tuple[str, str], Any, TypeAdapter[Any]]] = [
        ((ERROR, "error"), "serialization", TypeAdapter(ErrorBody))
    ]
    for operation in operations:
        if operation.body is not None:
            inputs.append(((operation.name, "body"), "validation", _adapter(operation.body)))
        if operation.response is not None:
            inputs.append(((operation.name, "response"), "serialization", TypeAdapter(operation.response)))
    schemas, definitions = TypeAdapter.json_schemas(inputs, ref_template=REF)
    components = dict(definitions.get("$defs", {}))
    paths: dict[str, dict[str, Any]] = {}
    for operation in operations:
        found = {key[0][1]: schema for key, schema in schemas.items() if key[0][0] == operation.name}
        paths.setdefault(f"{prefix}{operation.path}", {})[operation.method.lower()] = _item(operation, found)
    paths[f"{prefix}{PATH}"] = {"get": _document_item()}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "ranch hub API",
            "version": __version__,
            "description": "Rooms shared by people and agents, the agents' catalog, organizations and keys "
            "(docs/api.md). Live events: the WebSocket at /api/v1/ws.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer", "description": "Authorization: Bearer <key>"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
        "security": [{"bearer": []}, {"apiKey": []}],
    }


@functools.cache
def served(operations: tuple[Operation, ...], prefix: str) -> bytes:
    """The document's JSON, made once per process: it changes only with the code, and making it
    (pydantic's schemas of every model) cost each new app noticeable CPU (bench/README.md)."""
    return orjson.dumps(document(operations, prefix))


def _adapter(model: type[BaseModel] | TypeAdapter[Any]) -> TypeAdapter[Any]:
    return model if isinstance(model, TypeAdapter) else TypeAdapter(model)


def _item(operation: Operation, schemas: dict[str, Any]) -> dict[str, Any]:
    item: dict[str, Any] = {
        "operationId": operation.name,
        "summary": operation.summary,
        "parameters": _parameters(operation),
        "responses": _responses(operation, schemas.get("response")),
    }
    if "body" in schemas:
        content = {"application/json": {"schema": schemas["body"]}}
        item["requestBody"] = {"required": True, "content": content}
    return item


def _parameters(operation: Operation) -> list[dict[str, Any]]:
    parameters = [
        {"name": name, "in": "path", "required": True, "schema": PARAMETERS.get(name, {"type": "string"})}
        for name in PARAMETER.findall(operation.path)
    ]
    if operation.query is not None:
        schema = operation.query.model_json_schema()
        for name, field in schema.get("properties", {}).items():
            required = name in schema.get("required", [])
            description = field.pop("description", None)
            parameter = {"name": name, "in": "query", "required": required, "schema": field}
            parameters.append({**parameter, **({"description": description} if description else {})})
    return parameters


def _responses(operation: Operation, answer: dict[str, Any] | None) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    if operation.response is bytes:  # a file's bytes, in its own media type
        content = {"*/*": {"schema": {"type": "string", "format": "binary"}}}
        responses[str(operation.status)] = {"description": operation.summary, "content": content}
    elif answer is None:
        responses[str(operation.status)] = {"description": "No content"}
    else:
        content = {"application/json": {"schema": answer}}
        responses[str(operation.status)] = {"description": operation.summary, "content": content}
    if operation.empty is not None:
        responses["204"] = {"description": f"No content: {operation.empty}"}
    statuses = {401, 429, *operation.errors}
    if operation.body is not None or operation.query is not None:
        statuses.add(400)
    if operation.body is not None:
        statuses.add(413)
    for status in sorted(statuses):
        error = {"application/json": {"schema": {"$ref": REF.format(model=ERROR)}}}
        responses[str(status)] = {"description": ERRORS[status], "content": error}
    return responses


def _document_item() -> dict[str, Any]:
    return {
        "operationId": "openapi",
        "summary": "This document (no key needed)",
        "security": [],
        "parameters": [],
        "responses": {
            "200": {
                "description": "The OpenAPI 3.1 document of /api/v1",
                "content": {"application/json": {"schema": {"type": "object"}}},
            },
            "429": {
                "description": ERRORS[429],
                "content": {"application/json": {"schema": {"$ref": REF.format(model=ERROR)}}},
            },
        },
    }
