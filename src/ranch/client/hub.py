"""`Hub`: an async client of the hub's REST API (docs/api.md), typed with the hub's own models.

Requests are built with the models the server parses them with (a bad value fails here, naming
its field, before anything is sent), and answers are read into the server's response models.
Calls that change nothing (GET) are retried on a failed connection, a timeout and a 502/503/504;
every call is retried after a 429, once `Retry-After` has passed (the hub refused it before doing
anything), and after a connection that could not be opened (nothing was sent).
"""

from __future__ import annotations

import base64
import mimetypes
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import anyio
import httpx
from pydantic import BaseModel, TypeAdapter, ValidationError

from ranch._version import __version__
from ranch.client import errors, models
from ranch.client.events import RETRIES, EventStream
from ranch.protocol.invalid import invalid_input
from ranch.utils.backoff import retry_after

DEFAULT_URL = "http://127.0.0.1:8000"
MAX_RETRY_WAIT_S = 60.0
"""The longest `Retry-After` the client waits out before it gives the 429 to the caller."""
MAX_CURSOR = 2**63 - 1
PAGE = 200
"""Items a page of the hub's lists holds at most."""
IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE"})

M = TypeVar("M", bound=BaseModel)


class Hub:
    """A hub at `url` (env RANCH_URL, else http://127.0.0.1:8000) used with `key` (env RANCH_API_KEY).

    Use it as `async with Hub(...) as hub:`; `events()` follows rooms live over the WebSocket.
    """

    def __init__(
        self,
        url: str | None = None,
        key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        self.url = (url or os.environ.get("RANCH_URL") or DEFAULT_URL).rstrip("/")
        self.key = key if key is not None else os.environ.get("RANCH_API_KEY", "")
        self.retries = retries
        headers = {"User-Agent": f"ranch-client/{__version__}"}
        if self.key:
            headers["X-API-Key"] = self.key
        self._own_http = http is None
        self.http = http or httpx.AsyncClient(timeout=timeout)
        self.http.headers.update(headers)

    async def __aenter__(self) -> Hub:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own_http:
            await self.http.aclose()

    # -- who, organizations, users -----------------------------------------------------------------------

    async def me(self) -> models.Me:
        return await self._get(models.Me, "/me")

    async def create_organization(self, id: str, **fields: Any) -> models.NewOrganization:
        body = _body(models.CreateOrg, {"id": id, **fields})
        return _read(models.NewOrganization, await self._call("POST", "/organizations", body=body))

    async def organization(self) -> models.OrganizationView:
        """The key's organization."""
        return await self._get(models.OrganizationView, "/organizations/current")

    async def update_organization(self, **fields: Any) -> models.OrganizationView:
        """Change the organization's `name` or `allowed_agent_urls` (an owner or admin)."""
        body = _body(models.UpdateOrg, fields)
        return _read(models.OrganizationView, await self._call("PATCH", "/organizations/current", body=body))

    async def users(self) -> list[models.UserView]:
        return [item async for item in self._pages(models.UserView, "/users")]

    async def create_user(self, name: str, **fields: Any) -> models.NewUser:
        body = _body(models.CreateUser, {"name": name, **fields})
        return _read(models.NewUser, await self._call("POST", "/users", body=body))

    # -- agents ----------------------------------------------------------------------------------------

    async def agents(
        self, *, skill: str | None = None, tag: str | None = None, mode: str | None = None
    ) -> list[models.AgentView]:
        """The agents and teams the key may use, narrowed by skill, tag or media type."""
        filters = {name: value for name, value in (("skill", skill), ("tag", tag), ("mode", mode)) if value}
        return [item async for item in self._pages(models.AgentView, "/agents", filters)]

    async def agent(self, agent_id: str) -> models.AgentDetail:
        return await self._get(models.AgentDetail, f"/agents/{_segment(agent_id)}")

    async def register_agent(self, spec: dict[str, Any]) -> models.Registered | models.RegisteredExternal:
        """Register an agent (`spec`: its config entry, `visibility`, `tools`); an external agent's
        answer holds its key (`api_key`)."""
        try:
            models.REGISTRATION.validate_python(spec)
        except ValidationError as exc:
            raise _invalid(exc, spec) from None
        data = (await self._call("POST", "/agents", body=spec)).json()
        if "api_key" in data:
            return models.RegisteredExternal.model_validate(data)
        return models.Registered.model_validate(data)

    async def delete_agent(self, agent_id: str) -> None:
        await self._call("DELETE", f"/agents/{_segment(agent_id)}")

    # -- rooms -----------------------------------------------------------------------------------------

    async def rooms(self) -> list[models.RoomView]:
        return [item async for item in self._pages(models.RoomView, "/rooms")]

    async def room(self, room_id: str) -> models.RoomView:
        return await self._get(models.RoomView, f"/rooms/{_segment(room_id)}")

    async def create_room(self, title: str = "", **fields: Any) -> models.RoomView:
        """A room (`id`, `type`, `default_agent`, `participants`: [{"kind", "id", "role"?}])."""
        body = _body(models.CreateRoom, {"title": title, **fields} if title else fields)
        return _read(models.RoomView, await self._call("POST", "/rooms", body=body))

    async def update_room(self, room_id: str, **fields: Any) -> models.RoomView:
        body = _body(models.UpdateRoom, fields)
        return _read(models.RoomView, await self._call("PATCH", f"/rooms/{_segment(room_id)}", body=body))

    async def participants(self, room_id: str) -> list[models.ParticipantView]:
        return [
            item
            async for item in self._pages(models.ParticipantView, f"/rooms/{_segment(room_id)}/participants")
        ]

    async def add_participant(
        self, room_id: str, kind: str, id: str, role: str | None = None
    ) -> models.ParticipantView:
        body = _body(models.AddParticipant, {"kind": kind, "id": id, **({"role": role} if role else {})})
        path = f"/rooms/{_segment(room_id)}/participants"
        return _read(models.ParticipantView, await self._call("POST", path, body=body))

    async def remove_participant(self, room_id: str, kind: str, id: str) -> None:
        path = f"/rooms/{_segment(room_id)}/participants/{_segment(kind)}/{_segment(id)}"
        await self._call("DELETE", path)

    # -- messages --------------------------------------------------------------------------------------

    async def post(
        self,
        room_id: str,
        text: str | None = None,
        *,
        parts: Sequence[dict[str, Any]] = (),
        files: Sequence[str | Path] = (),
        **fields: Any,
    ) -> models.MessageView:
        """Post into a room: `text`, A2A `parts` (JSON form) and `files` (paths, sent inline), with
        `mentions`, `metadata`, `thread_id`, `type` or `reply_to` (a delivery it answers)."""
        every = list(parts)
        for path in files:
            every.append(await file_part(path))
        given: dict[str, Any] = {**fields}
        if text is not None:
            given["text"] = text
        if every:
            given["parts"] = every
        body = _body(models.PostMessage, given)
        return _read(
            models.MessageView, await self._call("POST", f"/rooms/{_segment(room_id)}/messages", body=body)
        )

    async def messages(self, room_id: str, since: int = 0) -> list[models.MessageView]:
        """Every message after the cursor `since`, oldest first."""
        path = f"/rooms/{_segment(room_id)}/messages"
        found: list[models.MessageView] = []
        while True:
            page = (await self._call("GET", path, params={"since": since, "limit": PAGE})).json()
            found += [models.MessageView.model_validate(item) for item in page["items"]]
            if page["next_cursor"] is None:
                return found
            since = int(page["next_cursor"])

    async def history(self, room_id: str, before: int, limit: int) -> list[models.MessageView]:
        """The newest `limit` messages before the cursor `before`, oldest first."""
        found: list[models.MessageView] = []
        while len(found) < limit:
            params = {"before": before, "limit": min(limit - len(found), PAGE)}
            page = (await self._call("GET", f"/rooms/{_segment(room_id)}/messages", params=params)).json()
            older = [models.MessageView.model_validate(item) for item in page["items"]]
            found = older + found
            if not older:  # a page may hold fewer than asked (its byte bound): go on until none
                break
            before = older[0].cursor
        return found

    async def part_bytes(self, room_id: str, message_id: str, index: int) -> bytes:
        """The bytes of a message's file part: `index` counts every part the message was posted with,
        its text parts included (the number ending the part's `url` in a view)."""
        path = f"/rooms/{_segment(room_id)}/messages/{_segment(message_id)}/parts/{index}"
        return (await self._call("GET", path)).content

    async def file_bytes(self, part: dict[str, Any]) -> bytes:
        """The bytes of a file part as a message view shows it: its `url` must be the hub's own
        relative link (`/api/v1/...`); an absolute URL is somewhere else, never sent the key."""
        url = str(part.get("url", ""))
        if not url.startswith("/api/v1/"):
            raise errors.InvalidInput(
                f"not a link to a file on the hub: {url[:80]!r}", code="INVALID_PARAMS", field="url"
            )
        return (await self._call("GET", url.removeprefix("/api/v1"))).content

    async def latest_cursor(self, room_id: str) -> int:
        """The cursor of the room's newest event (0: none yet): `events()` from it shows only new ones."""
        params = {"before": MAX_CURSOR, "limit": 1}
        page = (await self._call("GET", f"/rooms/{_segment(room_id)}/events", params=params)).json()
        return int(page["items"][-1]["cursor"]) if page["items"] else 0

    # -- executions ------------------------------------------------------------------------------------

    async def executions(self, room_id: str) -> list[models.ExecutionView]:
        return [
            item async for item in self._pages(models.ExecutionView, f"/rooms/{_segment(room_id)}/executions")
        ]

    async def execution(self, execution_id: str) -> models.ExecutionView:
        return await self._get(models.ExecutionView, f"/executions/{_segment(execution_id)}")

    async def cancel(self, execution_id: str) -> models.ExecutionView:
        answer = await self._call("POST", f"/executions/{_segment(execution_id)}/cancel")
        return _read(models.ExecutionView, answer)

    async def hand_off(
        self, execution_id: str, agent: str, reason: str = "", message: str | None = None
    ) -> models.ExecutionView:
        """Hand an execution's work to another agent of its room (the execution's own agent, or a room
        admin): the execution waits as `handoff` on the child execution that agent runs, and its agent
        is told the child's result in its next delivery. `message` is what the other agent is asked
        (default: `reason`)."""
        given: dict[str, Any] = {"agent": agent, "reason": reason}
        if message is not None:
            given["message"] = message
        body = _body(models.HandOff, given)
        answer = await self._call("POST", f"/executions/{_segment(execution_id)}/handoff", body=body)
        return _read(models.ExecutionView, answer)

    async def complete(self, execution_id: str, reason: str = "") -> models.ExecutionView:
        body = _body(models.CompleteExecution, {"reason": reason} if reason else {})
        answer = await self._call("POST", f"/executions/{_segment(execution_id)}/complete", body=body)
        return _read(models.ExecutionView, answer)

    # -- an external agent's inbox ---------------------------------------------------------------------

    async def next_delivery(self) -> models.DeliveryView | None:
        """The oldest delivery not acknowledged yet (an agent's key), or None."""
        answer = await self._call("GET", "/agent/messages/next")
        return None if answer.status_code == 204 else _read(models.DeliveryView, answer)

    async def ack(self, delivery_id: str) -> None:
        await self._call("POST", f"/agent/messages/{_segment(delivery_id)}/ack")

    def events(self, rooms: Mapping[str, int] | Sequence[str], cursor: int = 0) -> EventStream:
        """The rooms' events, live: `{"demo": 41, "ops": 0}` starts each room after its own cursor (a
        list of rooms starts each after `cursor`; see `ranch.client.events.EventStream`)."""
        return EventStream(self, rooms, cursor)

    # -- the calls -------------------------------------------------------------------------------------

    async def _get(self, model: type[M], path: str) -> M:
        return _read(model, await self._call("GET", path))

    async def _pages(
        self, model: type[M], path: str, params: dict[str, Any] | None = None
    ) -> AsyncIterator[M]:
        query = dict(params or {})
        while True:
            page = (await self._call("GET", path, params=query)).json()
            for item in page["items"]:
                yield model.model_validate(item)
            if not page.get("next_cursor"):
                return
            query["cursor"] = page["next_cursor"]

    async def _call(
        self, method: str, path: str, *, body: Any = None, params: dict[str, Any] | None = None
    ) -> httpx.Response:
        """One call, retried as the module says; an error answer raises its `errors` class."""
        url = f"{self.url}/api/v1{path}"
        idempotent = method in IDEMPOTENT
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            try:
                response = await self.http.request(method, url, json=body, params=params)
            except httpx.ConnectError as exc:  # no connection: nothing was sent
                if not last:
                    await anyio.sleep(_backoff(attempt))
                    continue
                raise errors.Unreachable(f"cannot reach the hub at {self.url}: {exc!r}") from exc
            except httpx.HTTPError as exc:
                if idempotent and not last:
                    await anyio.sleep(_backoff(attempt))
                    continue
                raise errors.Unreachable(f"no answer from the hub at {self.url}: {exc!r}") from exc
            status = response.status_code
            if status < 400:
                return response
            wait = _retry_after(response)
            if status == 429 and not last and wait <= MAX_RETRY_WAIT_S:
                await anyio.sleep(wait)
                continue
            if status in (502, 503, 504) and idempotent and not last:
                await anyio.sleep(max(wait, _backoff(attempt)))
                continue
            try:
                data = response.json()
            except ValueError:
                data = None
            raise errors.from_answer(status, data, wait)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


async def file_part(path: str | Path) -> dict[str, Any]:
    """A file as an A2A file part: its bytes inline (base64), its name and media type."""
    file = anyio.Path(path)
    data = await file.read_bytes()
    media_type = mimetypes.guess_type(file.name)[0] or "application/octet-stream"
    return {"raw": base64.b64encode(data).decode(), "filename": file.name, "mediaType": media_type}


def _body(model: type[BaseModel], given: dict[str, Any]) -> dict[str, Any]:
    """`given` checked by the server's own model; the JSON it sends (fields given only)."""
    try:
        parsed = model.model_validate(given)
    except ValidationError as exc:
        raise _invalid(exc, given) from None
    data: dict[str, Any] = parsed.model_dump(mode="json", exclude_unset=True, by_alias=True)
    return data


def _invalid(exc: ValidationError, value: Any) -> errors.InvalidInput:
    refused = invalid_input(exc, value)
    return errors.InvalidInput(str(refused), code="INVALID_PARAMS", field=refused.field, status=400)


def _read(model: type[M], response: httpx.Response) -> M:
    return TypeAdapter(model).validate_python(response.json())


def _segment(value: str) -> str:
    """An id as one path segment."""
    return quote(value, safe="")


def _backoff(attempt: int) -> float:
    return RETRIES.base(attempt)


def _retry_after(response: httpx.Response) -> float:
    """What the hub's `Retry-After` asks for: none, 0 s; one that cannot be read, 1 s."""
    asked = retry_after(response.headers)
    if asked is None:
        return 1.0 if "retry-after" in response.headers else 0.0
    return asked
