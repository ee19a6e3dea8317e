"""A client for the hub (docs/client.md): `Hub` for scripts, `ExternalAgent` for agents that
answer in rooms without an A2A server of their own, and the hub's errors as exception classes.

    async with Hub("http://127.0.0.1:8000", key) as hub:
        room = await hub.create_room("Plans", participants=[{"kind": "agent", "id": "helpdesk"}])
        await hub.post(room.id, "@helpdesk find papers on A2A", files=["notes.pdf"])
        async for event in hub.events([room.id]):
            print(event.type, event.data)
"""

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
from ranch.rooms.views import DeliveryView, EventView, ExecutionView, MessageView, ParticipantView, RoomView

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
