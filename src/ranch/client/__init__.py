"""A client for the hub (docs/client.md): `Hub` for scripts, `ExternalAgent` for agents that
answer in rooms without an A2A server of their own, and the hub's errors as exception classes.

    async with Hub("http://127.0.0.1:8000", key) as hub:
        room = await hub.create_room("Plans", participants=[{"kind": "agent", "id": "helpdesk"}])
        await hub.post(room.id, "@helpdesk find papers on A2A", files=["notes.pdf"])
        async for event in hub.events([room.id]):
            print(event.type, event.data)
"""

from typing import TYPE_CHECKING, Any

from ranch.client import models
from ranch.client.agent import Answer, Delivery, ExternalAgent, Handler
from ranch.client.errors import (
    Conflict,
    HubError,
    InvalidInput,
    NotFound,
    PayloadTooLarge,
    PermissionDenied,
    RateLimited,
    ServerError,
    Unauthenticated,
    Unavailable,
    Unprocessable,
    Unreachable,
    UnsupportedContent,
)
from ranch.client.events import EventStream
from ranch.client.hub import Hub, file_part

if TYPE_CHECKING:
    from ranch.client.models import (
        DeliveryView,
        EventView,
        ExecutionView,
        MessageView,
        ParticipantView,
        RoomView,
    )

_VIEWS = frozenset(
    {"DeliveryView", "EventView", "ExecutionView", "MessageView", "ParticipantView", "RoomView"}
)
"""The hub's views, each loaded from its module when first named (`ranch.client.models`)."""

__all__ = [
    "Answer",
    "Conflict",
    "Delivery",
    "DeliveryView",
    "EventStream",
    "EventView",
    "ExecutionView",
    "ExternalAgent",
    "Handler",
    "Hub",
    "HubError",
    "InvalidInput",
    "MessageView",
    "NotFound",
    "ParticipantView",
    "PayloadTooLarge",
    "PermissionDenied",
    "RateLimited",
    "RoomView",
    "ServerError",
    "Unauthenticated",
    "Unavailable",
    "Unprocessable",
    "Unreachable",
    "UnsupportedContent",
    "file_part",
]


if not TYPE_CHECKING:  # type checkers read the imports above; an unknown name stays an error

    def __getattr__(name: str) -> Any:
        if name in _VIEWS:
            return getattr(models, name)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
