"""The official a2a-sdk client as any outside caller uses it, and the one user-message builder."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, Task
from google.protobuf.json_format import MessageToDict

from ranch.wire.client_routing import URI


@contextlib.asynccontextmanager
async def sdk_client(
    agent_url: str,
    *,
    binding: str = "JSONRPC",
    version: str = "1.0",
    streaming: bool = False,
    send_version_header: bool = True,
    extensions: list[str] | None = None,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Client]:
    """An a2a-sdk `Client` for one ranch agent, resolved from its card like any A2A caller.

    `version="0.3"` keeps only the card's 0.3 interfaces, so the SDK picks its 0.3 compat
    transport; `send_version_header=False` strips `A2A-Version` from every request (the
    server must then treat it as 0.3). `extensions` go in the `A2A-Extensions` header;
    `headers` go with every request (an API key).
    """

    async def strip_version(request: httpx.Request) -> None:
        if not send_version_header:
            request.headers.pop("A2A-Version", None)
            request.headers.pop("a2a-version", None)

    sent = dict(headers or {})
    if extensions:
        sent["A2A-Extensions"] = ",".join(extensions)
    async with httpx.AsyncClient(timeout=30, headers=sent, event_hooks={"request": [strip_version]}) as http:
        card = await A2ACardResolver(http, agent_url).get_agent_card()
        keep = [
            i
            for i in card.supported_interfaces
            if i.protocol_version == version and i.protocol_binding == binding
        ]
        del card.supported_interfaces[:]
        card.supported_interfaces.extend(keep)
        config = ClientConfig(httpx_client=http, streaming=streaming, supported_protocol_bindings=[binding])
        client = ClientFactory(config).create(card)
        yield client


def user_message(
    text: str = "hello",
    *,
    context_id: str = "",
    task_id: str = "",
    metadata: dict[str, Any] | None = None,
) -> Message:
    """A user's Message with one text part and a fresh id; `as_json` gives its wire form."""
    message = Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        task_id=task_id,
        parts=[Part(text=text)],
    )
    if metadata:
        message.metadata.update(metadata)
    return message


def as_json(message: Message) -> dict[str, Any]:
    """A Message as it travels in a JSON body (`{"role": "ROLE_USER", "messageId": …}`)."""
    data: dict[str, Any] = MessageToDict(message)
    return data


async def send(client: Client, message: Message) -> list[StreamResponse]:
    """Every stream response the client yields for one SendMessage (one, unless streaming)."""
    return [response async for response in client.send_message(SendMessageRequest(message=message))]


def trail_of(task: Task) -> list[dict[str, Any]]:
    """The trail in a team task's metadata (docs/routing.md section 3)."""
    data = MessageToDict(task.metadata).get(URI, {})
    return list(data.get("trail", []))


async def ask(client: Client, text: str, *, task_id: str = "", context_id: str = "") -> Task:
    """The task a SendMessage of `text` answers (in `task_id` / `context_id` when given)."""
    (answer,) = await send(client, user_message(text, task_id=task_id, context_id=context_id))
    return answer.task


def said(task: Task) -> str:
    """The text of a task's status message."""
    return "\n".join(part.text for part in task.status.message.parts)
