"""The conformance kit's side of the wire: read an agent's card, send it one message, read the answer.

Plain A2A 1.0 over httpx, as any client outside ranch would speak it: JSON-RPC `SendMessage` when
the card offers it, else HTTP+JSON `message:send`. The answer is parsed into the SDK's Message or
Task, so it is judged by the reader ranch itself routes with (`client_routing.read_checked`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import httpx
from a2a.types import Message, Task
from google.protobuf.json_format import ParseDict, ParseError

from ranch.wire import client_routing

CARD_PATH = "/.well-known/agent-card.json"
EXTENSIONS_HEADER = "A2A-Extensions"


class Unreachable(Exception):
    """The agent cannot be tested at all: no card, no A2A 1.0 interface the kit speaks."""


@dataclass
class Answer:
    """What one message got back: the parsed reply, or why there is none."""

    reply: Message | Task | None = None
    error: str | None = None
    """A transport or protocol failure, in words (the JSON-RPC error, the HTTP status)."""
    activated: list[str] = field(default_factory=list)
    """The extensions the response's A2A-Extensions header lists (activated for this request)."""
    error_code: int | None = None


@dataclass
class Agent:
    """One agent under test: where its card said to send messages, and how."""

    card: dict[str, Any]
    binding: str
    url: str
    tenant: str
    client: httpx.AsyncClient

    @classmethod
    async def open(cls, url: str, client: httpx.AsyncClient) -> Agent:
        """Read the card at `url` (a base URL, or the card's own URL) and pick the interface."""
        card_url = url if url.endswith(".json") else url.rstrip("/") + CARD_PATH
        try:
            response = await client.get(card_url)
        except httpx.HTTPError as exc:
            raise Unreachable(f"cannot read the card at {card_url}: {exc!r}") from exc
        if response.status_code != 200:
            raise Unreachable(f"cannot read the card at {card_url}: HTTP {response.status_code}")
        try:
            card = response.json()
        except ValueError as exc:
            raise Unreachable(f"the card at {card_url} is not JSON") from exc
        if not isinstance(card, dict):
            raise Unreachable(f"the card at {card_url} is not a JSON object")
        for binding in ("JSONRPC", "HTTP+JSON"):
            for interface in card.get("supportedInterfaces") or []:
                if (
                    isinstance(interface, dict)
                    and interface.get("protocolBinding") == binding
                    and str(interface.get("protocolVersion", "1.0")).startswith("1")
                    and isinstance(interface.get("url"), str)
                ):
                    return cls(card, binding, interface["url"], str(interface.get("tenant") or ""), client)
        raise Unreachable(
            f"the card at {card_url} lists no A2A 1.0 JSONRPC or HTTP+JSON interface in supportedInterfaces"
        )

    def declaration(self) -> dict[str, Any] | None:
        """The card's `capabilities.extensions` entry for the client-routing URI, if any."""
        extensions = (self.card.get("capabilities") or {}).get("extensions") or []
        return next(
            (e for e in extensions if isinstance(e, dict) and e.get("uri") == client_routing.URI), None
        )

    async def send(self, text: str, data: dict[str, Any] | None) -> Answer:
        """Send `text` with the request data `data` (negotiated: header, `extensions` and metadata),
        or, with None, as a plain message that names no extension."""
        message: dict[str, Any] = {
            "messageId": uuid.uuid4().hex,
            "contextId": uuid.uuid4().hex,
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
        headers = {"A2A-Version": "1.0"}
        if data is not None:
            message["metadata"] = {client_routing.URI: data}
            message["extensions"] = [client_routing.URI]
            headers[EXTENSIONS_HEADER] = client_routing.URI
        params: dict[str, Any] = {"message": message}
        if self.tenant:
            params["tenant"] = self.tenant
        try:
            if self.binding == "JSONRPC":
                body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
                response = await self.client.post(self.url, json=body, headers=headers)
            else:
                response = await self.client.post(
                    self.url.rstrip("/") + "/message:send", json=params, headers=headers
                )
        except httpx.HTTPError as exc:
            return Answer(error=f"no answer: {exc!r}")
        if response.status_code in (401, 403):  # no scenario can say anything about this agent
            raise Unreachable(
                f"the agent at {self.url} refused the kit's request (HTTP {response.status_code}): "
                f"{response.text[:200]}; give its key with --key"
            )
        return _answer(response, self.binding)


def _answer(response: httpx.Response, binding: str) -> Answer:
    activated = [
        uri.strip() for value in response.headers.get_list(EXTENSIONS_HEADER) for uri in value.split(",")
    ]
    try:
        body = response.json()
    except ValueError:
        return Answer(error=f"HTTP {response.status_code}, not JSON", activated=activated)
    if binding == "JSONRPC":
        if not isinstance(body, dict) or "result" not in body:
            error = body.get("error") if isinstance(body, dict) else None
            code = error.get("code") if isinstance(error, dict) else None
            said = error.get("message") if isinstance(error, dict) else body
            return Answer(error=f"JSON-RPC error {code}: {said}", activated=activated, error_code=code)
        body = body["result"]
    elif response.status_code >= 400:
        return Answer(error=f"HTTP {response.status_code}: {response.text[:200]}", activated=activated)
    return _parsed(body, activated)


def _parsed(result: Any, activated: list[str]) -> Answer:
    """A SendMessageResponse's `task` or `message`, as the SDK's type."""
    if isinstance(result, dict) and isinstance(result.get("task"), dict):
        kind, data = Task(), result["task"]
    elif isinstance(result, dict) and isinstance(result.get("message"), dict):
        kind, data = Message(), result["message"]
    else:
        return Answer(error="the answer holds neither a task nor a message", activated=activated)
    try:
        reply: Message | Task = ParseDict(data, kind, ignore_unknown_fields=True)
    except ParseError as exc:
        return Answer(error=f"the answer is not valid A2A: {exc}", activated=activated)
    return Answer(reply=reply, activated=activated)
