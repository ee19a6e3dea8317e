"""`POST /api/v1/agents/import`: register the agents another domain's AI catalog publishes.

The catalog URL is judged by the outbound URL guard and fetched through the organization's guarded
pool (a bounded read), like a remote agent's card; each A2A entry is then registered as a remote
agent through the same path as `POST /api/v1/agents` (the guard, the allow-list, the card check),
one by one, so one refused entry does not stop the others. The answer says what was added and what
was refused, and why.
"""

from __future__ import annotations

import json
import re
from typing import Any

import anyio
import httpx
from pydantic import BaseModel, Field, ValidationError

from ranch.api.models import AgentView
from ranch.api.operations import Call
from ranch.catalog import records
from ranch.catalog.ai_catalog import A2A_CARD_TYPE
from ranch.catalog.cards import CARD_FILE
from ranch.catalog.requests import RegisterRemote
from ranch.exceptions import RanchError, Unprocessable, UnsafeUrl
from ranch.policy.fields import Body
from ranch.protocol.vocabulary import Visibility

MAX_CATALOG_BYTES = 1024 * 1024
MAX_ENTRIES = 100
"""Entries one import registers at most; the rest are refused, saying so."""
CATALOG_TIMEOUT = 10.0
_CARD_SUFFIX = "/" + CARD_FILE
_NOT_SLUG = re.compile(r"[^a-z0-9_-]+")


class ImportCatalog(Body):
    catalog_url: str = Field(pattern=r"^https?://", max_length=2048)
    """Where the catalog is: a domain's `/.well-known/ai-catalog.json` (AI Catalog draft)."""
    visibility: Visibility = Visibility.ORG
    """Given to every agent added (`global` is the server superuser's to give)."""
    card_ttl: float = Field(default=300.0, ge=0)


class Refused(BaseModel):
    entry: int
    """The entry's index in the catalog's `entries`."""
    identifier: str
    reason: str


class Imported(BaseModel):
    added: list[AgentView]
    refused: list[Refused]


async def import_catalog(call: Call) -> Imported:
    call.caller.require_admin("register agents")
    body = await call.body(ImportCatalog)
    services, runtime = call.services, call.runtime
    try:
        await services.guard.check(body.catalog_url)
    except UnsafeUrl as exc:
        raise Unprocessable(str(exc), "catalog_url") from exc
    entries = await _read_catalog(runtime.registry.tenant_pool.http, body.catalog_url)
    base = str(call.request.base_url).rstrip("/")
    added: list[AgentView] = []
    refused: list[Refused] = []
    for index, entry in enumerate(entries):
        identifier = str(entry.get("identifier", "")) if isinstance(entry, dict) else ""
        if index >= MAX_ENTRIES:
            refused.append(
                Refused(entry=index, identifier=identifier, reason=f"more than {MAX_ENTRIES} entries")
            )
            continue
        try:
            registration = _registration(entry, body)
            row, _key = await records.register(
                runtime.sessions, call.caller, registration, runtime.registry, runtime.group, services.guard
            )
        except (RanchError, ValueError) as exc:
            refused.append(Refused(entry=index, identifier=identifier, reason=_reason(exc)))
            continue
        await services.changes.agent_changed(row.id)  # every replica serves it
        added.append(AgentView.of(row, base))
    return Imported(added=added, refused=refused)


async def _read_catalog(http: httpx.AsyncClient, url: str) -> list[Any]:
    """The catalog's `entries`, read within CATALOG_TIMEOUT and MAX_CATALOG_BYTES."""
    body = bytearray()
    try:
        with anyio.fail_after(CATALOG_TIMEOUT):
            async with http.stream("GET", url, headers={"Accept": "application/json"}) as response:
                if response.status_code != 200:
                    raise Unprocessable(f"{url} answered HTTP {response.status_code}", "catalog_url")
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_CATALOG_BYTES:
                        raise Unprocessable(f"{url} is larger than {MAX_CATALOG_BYTES} bytes", "catalog_url")
        document = json.loads(body)
    except TimeoutError as exc:
        raise Unprocessable(f"no catalog from {url} within {CATALOG_TIMEOUT:g}s", "catalog_url") from exc
    except httpx.HTTPError as exc:
        raise Unprocessable(f"cannot fetch {url}: {exc or type(exc).__name__}", "catalog_url") from exc
    except ValueError as exc:
        raise Unprocessable(f"{url} is not JSON: {exc}", "catalog_url") from exc
    entries = document.get("entries") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise Unprocessable(f"{url} is not an AI catalog: it has no `entries` list", "catalog_url")
    return entries


def _registration(entry: Any, body: ImportCatalog) -> RegisterRemote:
    """A remote agent for one A2A entry; its URL is where its card is (`{url}/.well-known/...`)."""
    if not isinstance(entry, dict):
        raise ValueError("the entry is not an object")
    if entry.get("type") != A2A_CARD_TYPE:
        raise ValueError(f"type {entry.get('type')!r} is not {A2A_CARD_TYPE}")
    card_url = entry.get("url")
    if not isinstance(card_url, str) or not card_url.endswith(_CARD_SUFFIX):
        raise ValueError(
            f"its url is not an agent's card URL (…{_CARD_SUFFIX}); inline cards are not imported"
        )
    agent_id = _agent_id(entry)
    try:
        return RegisterRemote.model_validate(
            {
                "kind": "remote",
                "id": agent_id,
                "url": card_url.removesuffix(_CARD_SUFFIX),
                "visibility": body.visibility,
                "card_ttl": body.card_ttl,
            }
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        raise ValueError(f"{'.'.join(map(str, error['loc']))}: {error['msg']}") from exc


def _agent_id(entry: dict[str, Any]) -> str:
    """The id to register it under: ranch's own id (`extensions.ranch.id`), else the identifier's last
    segment, made a slug."""
    ranch = entry.get("extensions", {}).get("ranch", {}) if isinstance(entry.get("extensions"), dict) else {}
    name = ranch.get("id") if isinstance(ranch, dict) else None
    if not isinstance(name, str) or not name:
        name = re.split(r"[:/]", str(entry.get("identifier", "")))[-1]
    return _NOT_SLUG.sub("-", name.lower()).strip("-")[:64]


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
