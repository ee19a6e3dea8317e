"""The REST operations matched without Starlette's router, for the edge to serve straight from ASGI.

Starlette's middleware stack, router and mount (tried route by route) cost about as much as a plain
post's own work outside the database (bench/README.md "Rooms at scale"). Once its guards ran, the edge
(`EdgeApp`) asks `DirectRoutes` for the request's method and path: an operation that takes exactly
that method on a path of that shape is served by the same endpoint, with the scope the mount would
have given it. Anything else (HEAD, an unknown path, a method a path does not take, a trailing slash,
the OpenAPI document) goes down the full stack, which answers it as it always did.
"""

from __future__ import annotations

from collections.abc import Sequence

from ranch.api.operations import Operation, endpoint
from ranch.api.services import ApiServices
from ranch.edge.sdk import Endpoint

Pattern = tuple[str | None, ...]
"""A path's segments: a literal, or None where a path parameter stands."""


class DirectRoutes:
    """(method, path) -> the operation's endpoint and the path's parameters, or None."""

    def __init__(self, operations: Sequence[Operation], services: ApiServices, prefix: str) -> None:
        self.prefix = prefix
        self._routes: dict[tuple[str, int], list[tuple[Pattern, tuple[str, ...], Operation]]] = {}
        """(method, segments) -> its operations' patterns and their parameters' names, in the table's
        order (the first that matches wins, as in the router)."""
        self._endpoints = {operation: endpoint(operation, services) for operation in operations}
        for operation in operations:
            segments = operation.path.strip("/").split("/")
            pattern = tuple(None if _is_param(part) else part for part in segments)
            names = tuple(part[1:-1] for part in segments if _is_param(part))
            routes = self._routes.setdefault((operation.method, len(segments)), [])
            routes.append((pattern, names, operation))

    def __call__(self, method: str, path: str) -> tuple[Endpoint, dict[str, str]] | None:
        found = self.match(method, path)
        return None if found is None else (self._endpoints[found[0]], found[1])

    def match(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
        """The operation that takes `method` on `path`, and the path's parameters."""
        if not path.startswith(self.prefix) or path[len(self.prefix) : len(self.prefix) + 1] != "/":
            return None
        segments = path[len(self.prefix) + 1 :].split("/")
        for pattern, names, operation in self._routes.get((method, len(segments)), ()):
            if _matches(pattern, segments):
                values = [part for part, literal in zip(segments, pattern, strict=True) if literal is None]
                return operation, dict(zip(names, values, strict=True))
        return None


def _is_param(segment: str) -> bool:
    if ":" in segment:  # `{name:int}`: the router would convert it, this table does not
        raise ValueError(f"a path parameter with a convertor ({segment}) is not matched here")
    return segment.startswith("{") and segment.endswith("}")


def _matches(pattern: Pattern, segments: list[str]) -> bool:
    """Literals equal, and a parameter any segment that is not empty (the router's `str` convertor)."""
    for literal, part in zip(pattern, segments, strict=True):
        if (part != literal) if literal is not None else not part:
            return False
    return True
