"""The call context ranch builds on every request is the one pydantic's `model_construct` builds."""

from __future__ import annotations

from a2a.auth.user import UnauthenticatedUser
from a2a.server.context import ServerCallContext

from ranch.edge.context import call_context
from ranch.edge.guards import AGENT_KEY
from ranch.identity.principal import PRINCIPAL_KEY
from ranch.wire.middleware import SCOPE_KEY


def _pydantic(built: ServerCallContext) -> ServerCallContext:
    return ServerCallContext.model_construct(
        {"state", "user", "tenant", "requested_extensions"},
        state=built.state,
        user=built.user,
        tenant="",
        requested_extensions=set(built.requested_extensions),
    )


def test_the_quick_build_equals_model_construct() -> None:
    scope = {AGENT_KEY: "echo", PRINCIPAL_KEY: None, "type": "http"}
    built = call_context(scope, {"https://example.org/ext"})
    expected = _pydantic(built)
    assert built == expected
    assert built.__dict__ == expected.__dict__
    for attribute in ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"):
        assert getattr(built, attribute) == getattr(expected, attribute), attribute
    assert built.model_dump(exclude={"user"}) == expected.model_dump(exclude={"user"})
    assert isinstance(built.user, UnauthenticatedUser) and not built.user.is_authenticated
    assert built.state[SCOPE_KEY] is scope[SCOPE_KEY]  # the handler fills the request's own dict
    assert built.requested_extensions == {"https://example.org/ext"}
    built.tenant = "t"  # still a model: assignment works as on pydantic's
    assert built.tenant == "t" and expected.tenant == ""
