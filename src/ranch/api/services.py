"""What the REST API and the WebSocket use of the hub: one typed object, built by hub/app.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ranch.api.pagereads import PageReads
from ranch.catalog.changes import Changes
from ranch.identity.security import Security
from ranch.policy.ratelimit import RatePolicy
from ranch.policy.ssrf import UrlGuard
from ranch.rooms.runtime import RoomsRuntime


@dataclass(frozen=True)
class ApiServices:
    """The hub's parts the API calls; the rooms runtime exists only while the app's lifespan runs."""

    runtime: Callable[[], RoomsRuntime]
    """The rooms side (database sessions, rooms, catalog); raises until the app has started."""
    security: Security
    """Keys (a REST call's from the key cache, as on A2A: a revoked key leaves it at once; a WebSocket's
    looked up fresh), visibility, sessions."""
    changes: Changes
    """Tells the other replicas of a key revoked or an agent registered or removed here."""
    rates: RatePolicy
    """The per-caller rate limit; a WebSocket frame costs one request."""
    guard: UrlGuard
    """Judges the URLs an organization's agents are registered with."""
    max_frame_bytes: int
    """Largest WebSocket frame (the server's `max_message_bytes`)."""
    debug: bool = False
    """Internal errors' details in answers."""
    page_reads: PageReads = field(default_factory=PageReads)
    """Slots of the page reads whose answers are not yet sent (api/pagereads.py)."""
    replay_configs: dict[str, str] = field(default_factory=dict)
    """Config files the operator offers to replay turns on, by name (`--replay-config NAME=PATH`)."""
