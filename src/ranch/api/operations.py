"""One REST operation: its route, the models it reads and answers, and the endpoint that runs it.

The route table (api/routes.py) is a list of `Operation`s; the routes are made from it, and so is
the OpenAPI document (api/openapi.py). A handler gets a `Call`: the caller (its key was looked up
fresh), the API's services, and its body or query, read with the model its operation names (so
what is documented is what is parsed). It answers a response model, or a `Response` of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast, overload

from pydantic import BaseModel, TypeAdapter
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ranch.api import errors
from ranch.api.services import ApiServices
from ranch.db.engine import unavailable
from ranch.edge.guards import principal_of
from ranch.exceptions import InvalidInput, RanchError
from ranch.identity.principal import Principal
from ranch.policy.limits import load_json
from ranch.rooms.runtime import RoomsRuntime

M = TypeVar("M")
Q = TypeVar("Q", bound=BaseModel)

Handler = Callable[["Call"], Awaitable[Any]]


@dataclass(frozen=True)
class Operation:
    """One method on one path of /api/v1, as served and as documented."""

    method: str
    path: str
    """Under /api/v1, with `{name}` path parameters."""
    handler: Handler
    summary: str
    body: type[BaseModel] | TypeAdapter[Any] | None = None
    """The request body's model."""
    query: type[BaseModel] | None = None
    """The query parameters' model."""
    response: Any = None
    """The answer's type (a model, a union, a `Page[...]`); None: no content."""
    status: int = 200
    errors: tuple[int, ...] = ()
    """Statuses of the errors it may answer besides 401 and 429 (and 400 when it reads input)."""
    empty: str | None = None
    """When it may answer 204 instead (no content)."""

    @property
    def name(self) -> str:
        return self.handler.__name__


@dataclass(frozen=True)
class Call:
    """One request to an operation."""

    request: Request
    caller: Principal
    services: ApiServices
    operation: Operation

    @property
    def runtime(self) -> RoomsRuntime:
        return self.services.runtime()

    def param(self, name: str) -> str:
        value: str = self.request.path_params[name]
        return value

    @overload
    async def body(self, model: type[M]) -> M: ...
    @overload
    async def body(self, model: TypeAdapter[M]) -> M: ...
    async def body(self, model: type[M] | TypeAdapter[M]) -> M:
        """The body, parsed with `model`: the one its operation documents."""
        assert model is self.operation.body, f"{self.operation.name} documents {self.operation.body}"
        value = await json_body(self.request)
        adapter: TypeAdapter[M] = model if isinstance(model, TypeAdapter) else _adapter(model)
        return errors.parsed(adapter, value)

    def query(self, model: type[Q]) -> Q:
        """The query parameters, parsed with `model`: the one its operation documents."""
        assert model is self.operation.query, f"{self.operation.name} documents {self.operation.query}"
        return errors.parsed(_adapter(model), dict(self.request.query_params))


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}
"""One adapter per model, built once: building one costs more than the parse it serves."""


def _adapter(model: type[M]) -> TypeAdapter[M]:
    adapter = _ADAPTERS.get(model)
    if adapter is None:
        adapter = _ADAPTERS[model] = TypeAdapter(model)
    return cast(TypeAdapter[M], adapter)


async def json_body(request: Request) -> dict[str, Any]:
    """A JSON object, read as strict JSON within the depth limit (policy/limits.py `load_json`)."""
    raw = await request.body()
    try:
        value = load_json(raw) if raw else None
    except ValueError as exc:  # invalid UTF-8 or JSON, or nested too deep
        raise InvalidInput(f"the body is not valid JSON: {exc}", "body") from exc
    if not isinstance(value, dict):
        raise InvalidInput("the body must be a JSON object", "body")
    return value


def endpoint(operation: Operation, services: ApiServices) -> Callable[[Request], Awaitable[Response]]:
    """Authenticate, run the handler, and answer its result (or a RanchError, or the database being
    unavailable: STORE_UNAVAILABLE) as JSON."""

    async def answer(request: Request) -> Response:
        try:
            caller = principal_of(request.scope)  # the edge looked its key up, afresh
            result = await operation.handler(Call(request, caller, services, operation))
        except RanchError as exc:
            return errors.response(exc, debug=services.debug)
        except Exception as exc:  # a database that cannot be used is the caller's 503, not a 500
            failure = unavailable(exc, f"{request.method} {request.url.path}")
            if failure is None:
                raise
            return errors.response(failure, debug=services.debug)
        if isinstance(result, Response):
            return result
        content = result.model_dump(mode="json") if isinstance(result, BaseModel) else result
        return JSONResponse(content, status_code=operation.status)

    return answer
