"""The hub's agents: the config file's, and those registered over REST (kept in the database).

Config agents and teams are written to the `agents` table on every start (in the
organization `default`, visible to every organization). Agents registered over
the API are read with the config file's models (catalog/requests.py), get their
organization's id (`<org>.<id>`), are built from the spec stored for them, and are
served at /a2a/agents/{id} like the others; external agents (no A2A server) are
only rows: they read their messages over the API. An organization's agents call out
through the registry's tenant pool, whose every connection the URL guard judges;
only the config's and the superuser's (`spec["_operator"]`) use the operator's.
"""

from __future__ import annotations

import re
from typing import Any

from a2a.types import AgentCard
from anyio.abc import TaskGroup
from google.protobuf.json_format import MessageToDict
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from ranch.agents.base import Agent
from ranch.agents.remote import RemoteAgent
from ranch.agents.remote_grpc import GRPC, guard_url
from ranch.catalog.build import build_agent, build_team
from ranch.catalog.registry import Registry
from ranch.catalog.requests import (
    RegisterExternal,
    RegisterLlm,
    RegisterRemote,
    RegisterTeam,
    Registration,
)
from ranch.config import _AGENT_ADAPTER, RanchConfig, StdioMcpServerConfig, TeamConfig
from ranch.db.models import AgentKind, AgentRecord, AgentSource, Organization, Visibility, now
from ranch.exceptions import Conflict, InvalidInput, PolicyError, RanchError, Unprocessable, UnsafeUrl
from ranch.identity.keys import issue_key
from ranch.identity.orgs import DEFAULT_ORG, SEPARATOR, own_id
from ranch.identity.principal import Principal
from ranch.identity.visibility import named_agent
from ranch.policy.ssrf import UrlGuard
from ranch.utils.imports import imported
from ranch.wire.client import ForeignInterface

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
        row.org_id, row.kind, row.name, row.description = DEFAULT_ORG, AgentKind(kind), name, description
        row.visibility, row.source, row.spec = Visibility.GLOBAL, AgentSource.CONFIG, spec
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
            select(AgentRecord).where(
                AgentRecord.source == AgentSource.API, AgentRecord.is_external.is_(False)
            )
        )
    ).all()
    failed = []
    pending = [row for row in rows if row.id not in registry]
    while pending:
        progress = False
        for row in list(pending):
            members = row.spec.get("members", []) if row.kind == AgentKind.TEAM else []
            if all(member in registry for member in members):
                try:
                    await _loaded(row.kind)
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


async def resync(session: AsyncSession, registry: Registry, group: TaskGroup) -> None:
    """Serve what the agents table holds now: recorded agents not served yet start, and agents
    registered over the API whose rows are gone stop (another replica added or removed them)."""
    await load_registered(session, registry, group)
    recorded = set(await session.scalars(select(AgentRecord.id)))
    configured = {agent.id for agent in registry.config.agents} | {team.id for team in registry.config.teams}
    for agent_id in registry.ids():
        if agent_id not in recorded and agent_id not in configured:
            await registry.remove(agent_id)


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


async def _loaded(kind: str) -> None:
    """An llm agent's module imported before `build` needs it, off the event loop: the openai client
    takes about a second to import (ranch.utils.imports)."""
    if kind == AgentKind.LLM:
        await imported("ranch.agents.llm")


def build(kind: str, spec: dict[str, Any], registry: Registry) -> Agent:
    """An agent or team from its stored spec (a config entry, its id perhaps `<org>.<name>`)."""
    spec = dict(spec)
    pool = registry.pool if spec.pop(OPERATOR, False) is True else registry.tenant_pool
    agent_id = str(spec.get("id", ""))
    spec["id"] = agent_id.rpartition(SEPARATOR)[2]  # the config's id rule holds for the name chosen
    if kind == AgentKind.TEAM:
        team = TeamConfig.model_validate(spec).model_copy(update={"id": agent_id})
        return build_team(team, {member: registry.get(member) for member in team.members})
    config = _AGENT_ADAPTER.validate_python(spec).model_copy(update={"id": agent_id})
    return build_agent(config, pool, tenant=True)


async def register(
    sessions: async_sessionmaker[AsyncSession],
    principal: Principal,
    request: Registration,
    registry: Registry,
    group: TaskGroup,
    guard: UrlGuard | None = None,
) -> tuple[AgentRecord, str | None]:
    """Authorize, build, record and serve one agent; returns it and, for an external agent, its new key.

    The id is the organization's (`<org>.<id>`, bare in the default one). The database decides
    who gets it: the row is committed first (a second registration of the same id, even at the same
    moment, is a 409 CONFLICT), and only then is the agent served. If it cannot be served after all,
    its row is removed again and the error says why.
    """
    principal.require_admin("register agents")
    async with sessions() as session:
        row, agent, prefixes = await _prepare(session, principal, request, registry, guard)
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
    request: Registration,
    registry: Registry,
    guard: UrlGuard | None,
) -> tuple[AgentRecord, Agent | None, list[str]]:
    """Everything short of recording and serving: checks, the built agent (not served yet) and its
    row, and the organization's allow-list."""
    agent_id = own_id(principal.org_id, request.id)
    if await session.get(AgentRecord, agent_id) is not None or agent_id in registry:
        raise Conflict(f"the id '{agent_id}' is taken", "id")
    if request.visibility == Visibility.GLOBAL and not principal.is_superuser:
        raise InvalidInput("only the server's superuser may register global agents", "visibility")
    tenant_guard = None if principal.is_superuser else guard or UrlGuard()
    if tenant_guard is not None:
        await _tenant_safe(request, tenant_guard)
    row = AgentRecord(
        id=agent_id,
        org_id=principal.org_id,
        kind=AgentKind(request.kind),
        name=request.name or agent_id,
        description=request.description,
        visibility=request.visibility,
        owner_user_id=principal.id if request.visibility == Visibility.PERSONAL else None,
        tools=list(request.tools),
        source=AgentSource.API,
        history_length=request.history_length,
        model=request.model if isinstance(request, RegisterExternal | RegisterLlm) else None,
        is_external=isinstance(request, RegisterExternal),
    )
    if isinstance(request, RegisterExternal):
        row.spec = request.model_dump(mode="json", exclude_unset=True, exclude={"visibility", "tools"})
        row.spec["id"] = agent_id
        return row, None, []
    if isinstance(request, RegisterRemote):
        await _check_url(session, principal, request.url)
    members = await _members(session, principal, request) if isinstance(request, RegisterTeam) else {}
    row.spec = _spec(request, agent_id, members, operator=tenant_guard is None)
    await _loaded(row.kind)
    agent = _built(row.kind, row.spec, registry)
    if isinstance(agent, RemoteAgent) and isinstance(request, RegisterRemote):
        card = await _fetch_card(agent, tenant_guard)
        row.card, row.card_fetched_at = MessageToDict(card), now()
        row.url, row.card_ttl = request.url, request.card_ttl
        if not request.name:
            row.name = card.name or agent_id
        if not request.description:
            row.description = card.description
    row.history_length = agent.history_length
    org = await session.get(Organization, principal.org_id)
    return row, agent, org.allowed_agent_urls if org is not None else []


async def _members(session: AsyncSession, principal: Principal, team: RegisterTeam) -> dict[str, str]:
    """Each member name of the team -> the id of the usable agent it stands for (own ones first)."""
    members = {}
    for index, name in enumerate(team.members):
        members[name] = (await named_agent(session, principal, name, f"members[{index}]")).id
    if len(set(members.values())) != len(members):
        raise InvalidInput("two member names stand for one agent", "members")
    return members


def _spec(request: Registration, agent_id: str, members: dict[str, str], *, operator: bool) -> dict[str, Any]:
    """The stored spec: the config entry the agent is built from (again after a restart), with its
    full id and its members' ids; the superuser's marked (it may call internal addresses)."""
    spec = request.model_dump(mode="json", exclude_unset=True, exclude={"visibility", "tools"})
    spec["id"] = agent_id
    if isinstance(request, RegisterTeam):
        del spec["kind"]  # a team's config entry has none
        spec["members"] = [members[name] for name in request.members]
        spec["default_agent"] = members[request.default_agent]
        if request.routes:
            spec["routes"] = {members[a]: members.get(b, b) for a, b in request.routes.items()}
    if operator:
        spec[OPERATOR] = True
    return spec


def _built(kind: str, spec: dict[str, Any], registry: Registry) -> Agent:
    """`build`, its refusals as the caller's error (a rules regex RE2 refuses names its field)."""
    try:
        return build(kind, spec, registry)
    except PolicyError:
        raise
    except RanchError as exc:
        raise InvalidInput(str(exc)) from exc


TENANT_KEY_ENV = re.compile(r"^RANCH_KEY_[A-Z0-9_]+$")
"""Environment variables a tenant's llm agent may read its provider key from (the operator sets them)."""


async def _tenant_safe(request: Registration, guard: UrlGuard) -> None:
    """What an organization's admin may not ask of the server: start processes, read any of its
    environment variables or files, or make it call addresses inside its network (docs/api.md)."""
    urls: list[tuple[str, str]] = []
    if isinstance(request, RegisterRemote):
        urls.append(("url", request.url))
        if request.trusted_keys:  # paths of files on the server: the operator's to name, in the config
            raise InvalidInput(
                "trusted_keys name files on the server; they come from the config file only", "trusted_keys"
            )
    if isinstance(request, RegisterLlm):
        for index, server in enumerate(request.mcp_servers):
            if isinstance(server, StdioMcpServerConfig):
                raise InvalidInput(
                    "MCP servers started as processes (command) come from the config file only; give a url",
                    f"mcp_servers[{index}].command",
                )
            urls.append((f"mcp_servers[{index}].url", server.url))
        if request.api_key_env is not None and not TENANT_KEY_ENV.match(request.api_key_env):
            raise InvalidInput(
                "api_key_env must name a RANCH_KEY_* variable (the server's operator provides those)",
                "api_key_env",
            )
        if request.fetch_private_urls:
            raise InvalidInput(
                "fetch_private_urls lets callers' image URLs reach the server's network; "
                "only the server's superuser may set it",
                "fetch_private_urls",
            )
        if "base_url" in request.model_fields_set:  # the default is the public OpenAI API
            urls.append(("base_url", request.base_url))
        for index, entry in enumerate(request.remote_agents):
            urls.append((f"remote_agents[{index}]", entry if isinstance(entry, str) else entry.url))
    for field, url in urls:
        if url.startswith(("http://", "https://")):
            try:
                await guard.check(url)
            except UnsafeUrl as exc:
                raise Unprocessable(str(exc), field) from exc


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
        foreign = isinstance(exc.__cause__, ForeignInterface)  # read, but it would take the headers elsewhere
        raise Unprocessable(str(exc) if foreign else f"cannot read a valid agent card: {exc}", "url") from exc
    if tenant_guard is not None:
        await _card_safe(card, tenant_guard)
    return card


async def _card_safe(card: AgentCard, guard: UrlGuard) -> None:
    """Refuse a tenant's agent whose card sends calls inward now (calls are judged again when made)."""
    for index, interface in enumerate(card.supported_interfaces):
        grpc = interface.protocol_binding == GRPC  # `host:port`: judged as the address it dials
        try:
            await guard.check(guard_url(interface.url) if grpc else interface.url)
        except UnsafeUrl as exc:
            raise Unprocessable(
                f"its agent card names supportedInterfaces[{index}].url {interface.url}: {exc.reason}", "url"
            ) from exc


async def refresh_card(row: AgentRecord, registry: Registry) -> None:
    """Re-read a remote card older than `card_ttl`; keep the old one when the agent is unreachable."""
    if row.kind != AgentKind.REMOTE or row.id not in registry:
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
