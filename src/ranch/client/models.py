"""The hub's own models, which the client builds its requests with and reads its answers into.

They are the server's request and view models (one definition for both sides). Each loads when the
client first names it, from its module alone: `ranch rooms` reads `RoomView` (`rooms.views`: pydantic
and `ranch.protocol`) without the registrations' config models or the A2A SDK's types that other
models bring, and none of them loads the server (tests/cli/test_cli_start.py checks it).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ranch.api.models import (
        AgentDetail,
        AgentView,
        CompleteExecution,
        CreateOrg,
        CreateUser,
        Me,
        NewOrganization,
        NewUser,
        OrganizationView,
        Registered,
        RegisteredExternal,
        UpdateOrg,
        UserView,
    )
    from ranch.catalog.requests import REGISTRATION
    from ranch.rooms.requests import AddParticipant, CreateRoom, HandOff, PostMessage, UpdateRoom
    from ranch.rooms.views import (
        DeliveryView,
        EventView,
        ExecutionView,
        MessageView,
        ParticipantView,
        RoomView,
    )

_HOMES = {
    **dict.fromkeys(
        (
            "AgentDetail",
            "AgentView",
            "CompleteExecution",
            "CreateOrg",
            "CreateUser",
            "Me",
            "NewOrganization",
            "NewUser",
            "OrganizationView",
            "Registered",
            "RegisteredExternal",
            "UpdateOrg",
            "UserView",
        ),
        "ranch.api.models",
    ),
    "REGISTRATION": "ranch.catalog.requests",
    **dict.fromkeys(
        ("AddParticipant", "CreateRoom", "HandOff", "PostMessage", "UpdateRoom"), "ranch.rooms.requests"
    ),
    **dict.fromkeys(
        ("DeliveryView", "EventView", "ExecutionView", "MessageView", "ParticipantView", "RoomView"),
        "ranch.rooms.views",
    ),
}
"""Each model's module, imported when the model is first read."""


if not TYPE_CHECKING:  # type checkers read the imports above; an unknown name stays an error

    def __getattr__(name: str) -> Any:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [
    "REGISTRATION",
    "AddParticipant",
    "AgentDetail",
    "AgentView",
    "CompleteExecution",
    "CreateOrg",
    "CreateRoom",
    "CreateUser",
    "DeliveryView",
    "EventView",
    "ExecutionView",
    "HandOff",
    "Me",
    "MessageView",
    "NewOrganization",
    "NewUser",
    "OrganizationView",
    "ParticipantView",
    "PostMessage",
    "Registered",
    "RegisteredExternal",
    "RoomView",
    "UpdateOrg",
    "UpdateRoom",
    "UserView",
]
