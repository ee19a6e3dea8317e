"""The client-routing extension's JSON Schemas: the one document implementers read, and ranch checks with.

The document (`client_routing_v1.schema.json`, shipped beside this module) holds the request data
(router -> agent) and the response data (agent -> router) under `$defs`; the server publishes it at
`SCHEMA_PATH` (docs/extension/client-routing-v1.md). ranch reads every member's answer through it:
what fails is named with the schema location that failed, so the member's author can look it up.
"""

from __future__ import annotations

import copy
import json
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # jsonschema loads on the first check, not with every client that names the URI
    import jsonschema

SCHEMA_PATH = "/extensions/client-routing/v1/schema.json"
"""Where a ranch server publishes the document (no key needed)."""

SCHEMA_FILE = "client_routing_v1.schema.json"

Part = Literal["request", "response"]
PARTS: tuple[Part, ...] = ("request", "response")


@cache
def document() -> dict[str, Any]:
    """The whole schema document, as shipped (both parts under `$defs`)."""
    text = resources.files("ranch.wire").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def published(part: Part | None = None) -> dict[str, Any]:
    """What the server answers: the document, or (`part`) the same document whose root is that part,
    so a validator given it checks that part and every location keeps its `#/$defs/...` pointer."""
    if part is None:
        return document()
    rooted = copy.deepcopy(document())
    rooted["$ref"] = f"#/$defs/{part}"
    rooted["title"] = f"{rooted['title']}: {part}"
    return rooted


@cache
def validator(part: Part | Literal["recipient"]) -> jsonschema.protocols.Validator:
    """A Draft 2020-12 validator of one `$defs` entry, whose errors' `schema_path` is relative to it.

    It checks the entry with its `$ref`s replaced by what they name: the same checks, the same
    locations (a `$ref` sits under the keyword that failed), at a third of the cost; ranch reads
    every member's answer through it."""
    import jsonschema

    checker: jsonschema.protocols.Validator = jsonschema.Draft202012Validator(
        _inlined(document()["$defs"][part])
    )
    return checker


def _inlined(node: Any) -> Any:
    """`node` with each `{"$ref": "#/$defs/x"}` replaced by the entry it names (none is recursive)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inlined(document()["$defs"][ref.removeprefix("#/$defs/")])
        return {key: _inlined(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_inlined(item) for item in node]
    return node


def location(part: str, error: jsonschema.ValidationError) -> str:
    """Where in the published document `error` failed: `schema.json#/$defs/response/properties/...`."""
    steps = [part, *(str(step) for step in error.schema_path)]
    return "schema.json#/$defs/" + "/".join(step.replace("~", "~0").replace("/", "~1") for step in steps)


def errors(part: Part | Literal["recipient"], data: Any) -> list[jsonschema.ValidationError]:
    """Every place `data` fails that part of the document, in the document's order of fields (a list's
    items in their own order)."""
    return list(validator(part).iter_errors(data))
