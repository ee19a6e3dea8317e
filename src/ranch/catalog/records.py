"""The hub's agents: the config file's, and those registered over REST (kept in the database).

Config agents and teams are written to the `agents` table on every start (in the
organization `default`, visible to every organization). Agents registered over
the API are validated with the same models as the config file, built, and served
at /a2a/agents/{id} like the others; external agents (no A2A server) are only
rows: they read their messages over the API. An organization's agents call out
through the registry's tenant pool, whose every connection the URL guard judges;
only the config's and the superuser's (`spec["_operator"]`) use the operator's.
"""

from __future__ import annotations

import re
from typing import Any

from a2a.types import AgentCard
from anyio.abc import TaskGroup
from google.protobuf.json_format import MessageToDict
from pydantic import ValidationError
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from ranch.agents.base import Agent
from ranch.agents.remote import RemoteAgent
from ranch.catalog.build import build_agent, build_team
from ranch.catalog.registry import Registry
from ranch.config import _AGENT_ADAPTER, ID_PATTERN, RESERVED_IDS, RanchConfig, TeamConfig
from ranch.db.models import AgentRecord, Organization, now
from ranch.exceptions import Conflict, InvalidInput, PolicyError, RanchError, Unprocessable, UnsafeUrl
from ranch.identity.keys import issue_key
from ranch.identity.orgs import DEFAULT_ORG
from ranch.identity.principal import Principal
from ranch.identity.visibility import usable_agent
from ranch.policy.ssrf import UrlGuard

API_KINDS = ("remote", "external", "rules", "echo", "llm", "team")
OPERATOR = "_operator"
"""Set in the stored spec of an agent the superuser registered: it may call internal addresses."""


async def sync_config(session: AsyncSession, config: RanchConfig, registry: Registry) -> None:
    """Record the config's agents and teams (global, in the default organization)."""
    specs: list[tuple[str, str, dict[str, Any], str, str]] = [
        (a.id, a.kind, _without_secrets(a.model_dump(mode="json")), a.display_name, a.description)
        for a in config.agents
    ]
    specs += [(t.id, "team", t.model_dump(mode="json"), t.display_name, t.description) for t in config.teams]
    for agent_id, kind, spec, name, description in specs:
        row = await session.get(AgentRecord, agent_id) or AgentRecord(id=agent_id)
        row.org_id, row.kind, row.name, row.description = DEFAULT_ORG, kind, name, description
        row.visibility, row.source, row.spec = "global", "config", spec
        row.history_length = spec.get("history_length")
        row.url = spec.get("url")
        row.model = spec.get("model")
        session.add(row)


SECRET_MAPS = ("headers", "env")


def _without_secrets(spec: Any) -> Any:
    """A config entry with the values of `headers` and `env` masked: the config file rebuilds config
    agents, so the table never needs their credentials (which `${VAR}` expansion has filled in)."""
    if isinstance(spec, list):
        return [_without_secrets(item) for item in spec]
    if not isinstance(spec, dict):
        return spec
    return {
        key: {name: "[secret]" for name in value}
        if key in SECRET_MAPS and isinstance(value, dict)
        else _without_secrets(value)
        for key, value in spec.items()
    }


async def load_registered(session: AsyncSession, registry: Registry, group: TaskGroup) -> list[str]:
    """Build the API-registered agents (teams after their members); the ids that could not be built."""
    rows = (
        await session.scalars(
            select(AgentRecord).where(AgentRecord.source == "api", AgentRecord.is_external.is_(False))
        )
    ).all()
    failed = []
    pending = [row for row in rows if row.id not in registry]
    while pending:
        progress = False
        for row in list(pending):
            members = row.spec.get("members", []) if row.kind == "team" else []
            if all(member in registry for member in members):
                try:
                    agent = build(row.kind, row.spec, registry)
                    await activate(session, agent, row.org_id, registry, group)
                except RanchError:
                    failed.append(row.id)
                pending.remove(row)
                progress = True
        if not progress:
            failed.extend(row.id for row in pending)
            break
    return failed


async def activate(
    session: AsyncSession, agent: Agent, org_id: str, registry: Registry, group: TaskGroup
) -> None:
    """Narrow what the agent may call to its organization's allow-list, then serve it (opened)."""
    org = await session.get(Organization, org_id)
    _narrow(agent, org.allowed_agent_urls if org is not None else [])
    await registry.host(agent, group)


def _narrow(agent: Agent, prefixes: list[str]) -> None:
    allowed = getattr(agent, "allowed_remote_urls", None)  # llm agents; imported lazily (openai is heavy)
    if prefixes and allowed is not None:
        agent.allowed_remote_urls = frozenset(  # type: ignore[attr-defined]
            url for url in allowed if any(url.startswith(prefix) for prefix in prefixes)
        )


def build(kind: str, spec: dict[str, Any], registry: Registry) -> Agent:
    spec = dict(spec)
    pool = registry.pool if spec.pop(OPERATOR, False) is True else registry.tenant_pool
    if kind == "team":
        config = TeamConfig.model_validate(spec)
        return build_team(config, {member: registry.get(member) for member in config.members})
    return build_agent(_AGENT_ADAPTER.validate_python(spec), pool, tenant=True)


async def register(
    sessions: async_sessionmaker[AsyncSession],
    principal: Principal,
    body: dict[str, Any],
    registry: Registry,
    group: TaskGroup,
    guard: UrlGuard | None = None,
) -> tuple[AgentRecord, str | None]:
    """Validate, build, record and serve one agent; returns it and, for an external agent, its new key.

    The database decides who gets an id: the row is committed first (a second registration of the
    same id, even at the same moment, is a 409 CONFLICT), and only then is the agent served. If it
    cannot be served after all, its row is removed again and the error says why.
    """
    async with sessions() as session:
        row, agent, prefixes = await _prepare(session, principal, body, registry, guard)
    key = None
    try:
        async with sessions() as session, session.begin():
            session.add(row)
            if row.is_external:
                key = await issue_key(session, principal.org_id, "agent", row.id)
    except IntegrityError as exc:
        if agent is not None:
            await agent.aclose()
        raise Conflict(f"the id '{row.id}' is taken", "id") from exc
    if agent is not None:
        await _serve(sessions, row, agent, prefixes, registry, group)
    return row, key


async def _serve(
    sessions: async_sessionmaker[AsyncSession],
    row: AgentRecord,
    agent: Agent,
    prefixes: list[str],
    registry: Registry,
    group: TaskGroup,
) -> None:
    """Serve a recorded agent; on failure, un-record it (the id stays free) and say why."""
    _narrow(agent, prefixes)
    try:
        await registry.host(agent, group)
    except Exception as exc:
        async with sessions() as session, session.begin():
            await session.execute(delete(AgentRecord).where(AgentRecord.id == row.id))
        why = str(exc) if isinstance(exc, RanchError) else f"cannot start: {type(exc).__name__}: {exc}"
        raise Unprocessable(f"agent '{row.id}' was not registered: {why}", "id") from exc


async def _prepare(
    session: AsyncSession,
    principal: Principal,
    body: dict[str, Any],
    registry: Registry,
    guard: UrlGuard | None,
) -> tuple[AgentRecord, Agent | None, list[str]]:
    """Everything short of recording and serving: checks, the built agent (not served yet) and its
    row, and the organization's allow-list."""
    principal.require_admin("register agents")
    agent_id = check_id(body.get("id"))
    kind = body.get("kind")
    if kind not in API_KINDS:
        why = " (python agents come from the config file only)" if kind == "python" else ""
        raise InvalidInput(f"kind must be one of {', '.join(API_KINDS)}{why}", "kind")
    if await session.get(AgentRecord, agent_id) is not None or agent_id in registry:
        raise Conflict(f"the id '{agent_id}' is taken", "id")
    visibility = body.get("visibility", "org")
    if visibility not in ("personal", "org", "global"):
        raise InvalidInput("visibility must be personal, org or global", "visibility")
    if visibility == "global" and not principal.is_superuser:
        raise InvalidInput("only the server's superuser may register global agents", "visibility")
    if "api_key" in body:
        raise InvalidInput(
            "the hub does not store keys: give api_key_env, naming an environment variable of the server",
            "api_key",
        )
    _history_length(body)  # every kind: the column holds 32 bits
    tenant_guard = None if principal.is_superuser else guard or UrlGuard()
    spec = await _spec(body, tenant_guard)
    row = AgentRecord(
        id=agent_id,
        org_id=principal.org_id,
        kind=kind,
        name=str(body.get("name") or agent_id),
        description=str(body.get("description") or ""),
        visibility=visibility,
        owner_user_id=principal.id if visibility == "personal" else None,
        tools=list(body.get("tools") or []),
        source="api",
        spec=spec,
        is_external=kind == "external",
    )
    if kind == "external":
        _only(body, {"id", "kind", "name", "description", "visibility", "history_length", "tools", "model"})
        row.model = body.get("model")
        row.history_length = _history_length(body)
        return row, None, []
    if kind == "remote":
        await _check_url(session, principal, str(body.get("url") or ""))
    if kind == "team":
        for index, member in enumerate(body.get("members") or []):
            await usable_agent(session, principal, str(member), f"members[{index}]")
    agent = _build_checked(kind, spec, registry)
    if isinstance(agent, RemoteAgent):
        card = await _fetch_card(agent, tenant_guard)
        row.card, row.card_fetched_at = MessageToDict(card), now()
        row.url, row.card_ttl = spec["url"], float(spec.get("card_ttl", 300.0))
        if not body.get("name"):
            row.name = card.name or agent_id
        if not body.get("description"):
            row.description = card.description
    row.history_length = agent.history_length
    row.model = body.get("model")
    org = await session.get(Organization, principal.org_id)
    return row, agent, org.allowed_agent_urls if org is not None else []


TENANT_KEY_ENV = re.compile(r"^RANCH_KEY_[A-Z0-9_]+$")
"""Environment variables a tenant's llm agent may read its provider key from (the operator sets them)."""


async def _spec(body: dict[str, Any], tenant_guard: UrlGuard | None) -> dict[str, Any]:
    """The agent's stored spec; an organization's (`tenant_guard` given) checked, the superuser's marked."""
    spec = {k: v for k, v in body.items() if k not in ("visibility", "tools", "model_type", OPERATOR)}
    if tenant_guard is None:
        spec[OPERATOR] = True
    else:
        await _tenant_safe(body, tenant_guard)
    return spec


async def _tenant_safe(body: dict[str, Any], guard: UrlGuard) -> None:
    """What an organization's admin may not ask of the server: start processes, read any of its
    environment variables, or make it call addresses inside its network (docs/api.md)."""
    for index, server in enumerate(body.get("mcp_servers") or []):
        if isinstance(server, dict) and "command" in server:
            raise InvalidInput(
                "MCP servers started as processes (command) come from the config file only; give a url",
                f"mcp_servers[{index}].command",
            )
    key_env = body.get("api_key_env")
    if key_env is not None and not (isinstance(key_env, str) and TENANT_KEY_ENV.match(key_env)):
        raise InvalidInput(
            "api_key_env must name a RANCH_KEY_* variable (the server's operator provides those)",
            "api_key_env",
        )
    urls: list[tuple[str, Any]] = [("url", body.get("url")), ("base_url", body.get("base_url"))]
    urls += [
        (f"mcp_servers[{i}].url", s.get("url"))
        for i, s in enumerate(body.get("mcp_servers") or [])
        if isinstance(s, dict)
    ]
    urls += [
        (f"remote_agents[{i}]", r.get("url") if isinstance(r, dict) else r)
        for i, r in enumerate(body.get("remote_agents") or [])
    ]
    for field, url in urls:
        if isinstance(url, str) and url.startswith(("http://", "https://")):
            try:
                await guard.check(url)
            except UnsafeUrl as exc:
                raise Unprocessable(str(exc), field) from exc


def check_id(value: Any) -> str:
    if not isinstance(value, str) or not re.match(ID_PATTERN, value) or len(value) > 64:
        raise InvalidInput("id must match [a-z0-9][a-z0-9_-]* (at most 64 characters)", "id")
    if value in RESERVED_IDS:
        raise InvalidInput(f"'{value}' is reserved for routing", "id")
    return value


MAX_HISTORY_LENGTH = 2**31 - 1
"""The largest `history_length` the agents table holds (a 32-bit column)."""


def _history_length(body: dict[str, Any]) -> int | None:
    value = body.get("history_length")
    if value is not None and (
        not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_HISTORY_LENGTH
    ):
        message = f"history_length must be an integer from 0 to {MAX_HISTORY_LENGTH}"
        raise InvalidInput(message, "history_length")
    return value


def _only(body: dict[str, Any], allowed: set[str]) -> None:
    extra = sorted(set(body) - allowed)
    if extra:
        raise InvalidInput(f"unknown field '{extra[0]}' for this kind", extra[0])


def _build_checked(kind: str, spec: dict[str, Any], registry: Registry) -> Agent:
    try:
        return build(kind, spec, registry)
    except ValidationError as exc:
        error = exc.errors()[0]
        loc = [str(part) for part in error["loc"]]
        if loc and loc[0] == kind:
            loc = loc[1:]  # the union's tag
        raise InvalidInput(error["msg"], ".".join(loc) or None) from exc
    except PolicyError:
        raise  # already names its field (a rules regex RE2 refuses)
    except RanchError as exc:
        raise InvalidInput(str(exc)) from exc


async def _check_url(session: AsyncSession, principal: Principal, url: str) -> None:
    org = await session.get(Organization, principal.org_id)
    allowed = org.allowed_agent_urls if org else []
    if allowed and not any(url.startswith(prefix) for prefix in allowed):
        raise Unprocessable(
            f"'{url}' is not on organization '{principal.org_id}''s allow-list of agent URLs", "url"
        )


async def _fetch_card(agent: RemoteAgent, tenant_guard: UrlGuard | None) -> AgentCard:
    try:
        card = await agent.card()
    except RanchError as exc:
        raise Unprocessable(f"cannot read a valid agent card: {exc}", "url") from exc
    if tenant_guard is not None:
        await _card_safe(card, tenant_guard)
    return card


async def _card_safe(card: AgentCard, guard: UrlGuard) -> None:
    """Refuse a tenant's agent whose card sends calls inward now (calls are judged again when made)."""
    for index, interface in enumerate(card.supported_interfaces):
        try:
            await guard.check(interface.url)
        except UnsafeUrl as exc:
            raise Unprocessable(
                f"its agent card names supportedInterfaces[{index}].url {interface.url}: {exc.reason}", "url"
            ) from exc


async def refresh_card(row: AgentRecord, registry: Registry) -> None:
    """Re-read a remote card older than `card_ttl`; keep the old one when the agent is unreachable."""
    if row.kind != "remote" or row.id not in registry:
        return
    if row.card_fetched_at is not None and now() - row.card_fetched_at < row.card_ttl:
        return
    agent = registry.get(row.id)
    if isinstance(agent, RemoteAgent):
        try:
            card = await agent.card()
        except RanchError:
            return
        row.card, row.card_fetched_at = MessageToDict(card), now()
