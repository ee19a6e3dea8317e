"""The AI catalog at /.well-known/ai-catalog.json (AI Catalog draft 0.9, which ARD builds on).

One entry per agent or team the caller may see, typed `application/a2a-agent-card+json`, naming
its card by `url` (or carrying it inline as `data` with `?cards=inline`: the draft allows exactly
one of the two). Name, description and version are left to the card, as the draft asks, so they
cannot drift; skills' tags are copied as the entry's `tags` for filtering crawlers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ranch.agents.base import AgentInfo
from ranch.catalog.cards import CATALOG_PATH, card_paths
from ranch.catalog.discovery import card_skills

SPEC_VERSION = "0.9"
A2A_CARD_TYPE = "application/a2a-agent-card+json"
CATALOG_TYPE = "application/ai-catalog+json"


def identifier(host: str, agent_id: str) -> str:
    """The entry's `urn:air:{publisher}:{namespace}:{name}`: the serving domain, `agent`, the id."""
    return f"urn:air:{host}:agent:{agent_id}"


def catalog_entry(
    base_url: str, host: str, info: AgentInfo, kind: str, card: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One agent's entry: its card by URL, or inline when `card` is given."""
    entry: dict[str, Any] = {"identifier": identifier(host, info.id), "type": A2A_CARD_TYPE}
    if card is None:
        entry["url"] = card_paths(base_url, info.id)["a"]
    else:
        entry["data"] = card
    tags = sorted({tag for skill in card_skills(info) for tag in skill.tags})
    if tags:
        entry["tags"] = tags
    entry["extensions"] = {"ranch": {"id": info.id, "kind": kind}}
    return entry


def ai_catalog(base_url: str, host: str, entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The catalog document: `specVersion`, the hub as `host`, and its `entries`."""
    return {
        "specVersion": SPEC_VERSION,
        "host": {
            "displayName": f"ranch hub at {host}",
            "identifier": host,
            "documentationUrl": f"{base_url.rstrip('/')}{CATALOG_PATH}",
        },
        "entries": list(entries),
    }
