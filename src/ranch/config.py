"""The YAML configuration: agents and teams, validated before anything is served.

Every model forbids unknown keys, so a typo is an error naming the field.
`load_config` collects *all* problems (schema and cross-references) and raises
one `ConfigError` listing each with the id it concerns; `ranch check` prints them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    SecretStr,
    Tag,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from ranch.exceptions import ConfigError

ID_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
RESERVED_IDS = frozenset({"user", "sender"})
KINDS = ("rules", "echo", "remote", "llm", "python")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


_TOKEN = r"[A-Za-z0-9*][A-Za-z0-9!#$&^_.+*-]{0,126}"
MediaType = Annotated[str, Field(pattern=rf"^{_TOKEN}/{_TOKEN}$")]
"""A media type as an agent card lists it: `type/subtype`, `type/*` or `*/*`."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SkillConfig(_Strict):
    """One skill on the agent's card; its name (or tags) become peer capabilities."""

    id: str
    name: str
    description: str = ""
    tags: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)


class _AgentBase(_Strict):
    id: str = Field(pattern=ID_PATTERN)
    name: str | None = None
    """Display name; defaults to the id."""
    description: str = ""
    skills: list[SkillConfig] = Field(default_factory=list)
    history_length: int | None = Field(default=None, ge=0)
    """How many unseen conversation entries this agent is shown; None = default (20)."""
    timeout: float = Field(default=60.0, gt=0)
    """Seconds one hop to this agent may take before it fails."""
    require_extensions: list[str] = Field(default_factory=list)
    """Extension URIs a caller must ask for (A2A-Extensions) to talk to this agent."""
    input_modes: list[MediaType] | None = Field(default=None, min_length=1)
    """Media types it takes (`image/*`, `*/*` allowed); None: its kind's default (docs/surface.md)."""
    output_modes: list[MediaType] | None = Field(default=None, min_length=1)
    """Media types its answers may hold; None: its kind's default."""
    resume: Literal["rerun", "skip", "fail"] | None = None
    """What a team turn taken over from a stopped replica does with this agent's hop in flight: run it
    again (an idempotent agent), go on to the default agent with a note that it was lost, or fail the
    turn; None: its kind's default (docs/routing.md, "Durable turns")."""

    @property
    def display_name(self) -> str:
        return self.name or self.id


class RuleConfig(_Strict):
    """One rule of a `rules` agent: the first rule whose regex matches answers."""

    match: str | None = None
    """Regex searched in the incoming text; omitted = always matches."""
    reply: str
    """Reply text; `{text}` is replaced by the incoming text."""
    route: str | None = None
    """Agent id, `user` or `sender`; omitted = no routing decision."""
    reason: str | None = None


class RulesAgentConfig(_AgentBase):
    kind: Literal["rules"]
    rules: list[RuleConfig] = Field(min_length=1)


class EchoAgentConfig(_AgentBase):
    kind: Literal["echo"]


class RemoteAgentConfig(_AgentBase):
    kind: Literal["remote"]
    url: str = Field(pattern=r"^https?://")
    """The agent's base URL; its card is read from `{url}/.well-known/agent-card.json`."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Sent with every call to this agent; `${VAR}` is read from the environment."""
    card_ttl: float = Field(default=300.0, ge=0)
    """Seconds a fetched card is trusted before it is fetched again."""
    verify_card: bool = False
    """Refuse the agent unless its card carries a signature that verifies with one of `trusted_keys`."""
    trusted_keys: list[str] = Field(default_factory=list)
    """Files of the keys that may sign its card: PEM public keys or JWKS (JSON) files."""
    binding: Literal["auto", "http", "grpc"] = "auto"
    """How ranch calls it: `auto` as its card prefers (gRPC when a GRPC interface comes before the
    HTTP ones, or is the only one), `http` over JSON-RPC or HTTP+JSON, `grpc` over its GRPC interface."""

    @model_validator(mode="after")
    def _keys_to_verify_with(self) -> RemoteAgentConfig:
        if self.verify_card and not self.trusted_keys:
            raise ValueError("verify_card needs trusted_keys (PEM public keys or JWKS files)")
        return self


class PythonAgentConfig(_AgentBase):
    kind: Literal["python"]
    entry: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    """`module:attr` naming a class, factory or async-generator function."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the class or factory."""
    client_routing: bool = False
    """Declare the client-routing extension (the agent makes routing decisions)."""


class StdioMcpServerConfig(_Strict):
    """An MCP server ranch starts as a subprocess and talks to over stdin/stdout."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment for the subprocess; `${VAR}` is read from ranch's environment."""
    cwd: str | None = None
    timeout: float = Field(default=30.0, gt=0)
    """Seconds to start the server, and for each tool call."""


class HttpMcpServerConfig(_Strict):
    """An MCP server reached over streamable HTTP."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=30.0, gt=0)


def _mcp_transport(value: Any) -> str:
    has_url = isinstance(value, dict) and "url" in value or isinstance(value, HttpMcpServerConfig)
    return "http" if has_url else "stdio"


McpServerConfig = Annotated[
    Annotated[StdioMcpServerConfig, Tag("stdio")] | Annotated[HttpMcpServerConfig, Tag("http")],
    Discriminator(_mcp_transport),
]


class RemoteToolConfig(_Strict):
    """An A2A agent an llm agent may call with `call_remote_agent`."""

    url: str = Field(pattern=r"^https?://")
    name: str | None = None
    """A short name the model may use instead of the URL."""
    description: str = ""
    headers: dict[str, str] = Field(default_factory=dict)


class LlmAgentConfig(_AgentBase):
    """An OpenAI-compatible chat model (OpenAI, Azure OpenAI, Ollama, vLLM, LM Studio, OpenRouter, ...)."""

    kind: Literal["llm"]
    model: str = Field(min_length=1)
    base_url: str = Field(default="https://api.openai.com/v1", pattern=r"^https?://")
    api_key: SecretStr | None = None
    """Usually `${OPENAI_API_KEY}`; never logged, never shown in errors or cards."""
    api_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Name of the environment variable holding the key (read when the agent is built)."""
    system_prompt: str = "You are a helpful assistant."
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, gt=0)
    retry_count: int = Field(default=3, ge=0, le=10)
    """Retries after a 429, a 5xx or a refused connection, with backoff (Retry-After is honoured)."""
    request_timeout: float = Field(default=60.0, gt=0)
    """Seconds one request to the provider may take."""
    stream: bool = True
    """Ask the provider for tokens as they are generated (each becomes an artifact update)."""
    max_tool_rounds: int = Field(default=8, ge=0)
    """Model calls that may end in tool calls before the model must answer."""
    mcp_servers: list[McpServerConfig] = Field(default_factory=list)
    """MCP servers whose tools the model may call: `{name, command, args, env}` or `{name, url, headers}`."""
    remote_agents: list[RemoteToolConfig | str] = Field(default_factory=list)
    """A2A agents callable with `call_remote_agent`: the allow-list (URLs, or {url, name})."""
    headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers for the provider (e.g. OpenRouter's HTTP-Referer)."""
    fetch_private_urls: bool = False
    """Let the image URLs a message carries reach loopback and private addresses too (the operator's
    own image store); off, they reach public addresses only. The config's and the superuser's only."""

    @model_validator(mode="after")
    def _one_key_source(self) -> LlmAgentConfig:
        if self.api_key is not None and self.api_key_env is not None:
            raise ValueError("give api_key or api_key_env, not both")
        return self


AgentConfig = Annotated[
    RulesAgentConfig | EchoAgentConfig | RemoteAgentConfig | PythonAgentConfig | LlmAgentConfig,
    Field(discriminator="kind"),
]


class TokenBudget(_Strict):
    tokens: int = Field(gt=0)


Who = Annotated[str, Field(pattern=r"^(org|role|user|agent|kind):[^\s:]+$")]
"""A caller a team's `access` rule names: `org:<id>`, `role:<owner|admin|member>`, `user:<id>`,
`agent:<id>` or `kind:<person|agent>`."""


class MemberAccess(_Strict):
    """Which callers a member is open to: any `allow` (all when none is listed) and no `deny`."""

    allow: list[Who] | None = None
    deny: list[Who] = Field(default_factory=list)


class Approvers(_Strict):
    """Who answers a team's approval question instead of the default (the person who asked, or an
    owner or admin): persons with one of these `roles` or ids (docs/routing.md, "The caller")."""

    roles: list[Literal["owner", "admin", "member"]] = Field(default_factory=list)
    users: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _someone(self) -> Approvers:
        if not self.roles and not self.users:
            raise ValueError("name at least one of roles or users (or leave approvers out: the default)")
        return self


class Approval(_Strict):
    """A team's `approval`: the members a turn reaches only once a person approved the hop, and who
    may approve it (`approvers`; the default when None)."""

    members: list[str] = Field(default_factory=list)
    approvers: Approvers | None = None


class TeamConfig(_Strict):
    """A team: members, a default agent, and the Router's policies."""

    id: str = Field(pattern=ID_PATTERN)
    name: str | None = None
    description: str = ""
    members: list[str] = Field(min_length=1)
    default_agent: str
    max_hops: int = Field(default=10, ge=1)
    on_invalid_recipient: Literal["fallback", "error"] = "fallback"
    on_loop: Literal["default", "user", "fail"] = "default"
    """A loop (docs/routing.md, "Loops"): the default agent once, then the user (`default`); the
    user; or fail the turn."""
    loop_repeats: int = Field(default=3, ge=2)
    """The same edge with the same text, or hops in a row with nothing new, that make a loop."""
    loop_cycles: int = Field(default=3, ge=1)
    """Rounds a cycle of two or three members may make (a review loop's rounds); one more is a loop."""
    on_done: Literal["return", "escalate"] = "return"
    """What its members' `user` means to a team that calls it: `return` its answer (the caller's
    static route for it still applies), or `escalate` (the caller's turn ends too)."""
    access: dict[str, MemberAccess] = Field(default_factory=dict)
    """Member id -> the callers it is open to (docs/routing.md, "The caller")."""
    approval: Approval = Field(default_factory=Approval)
    """Members a turn goes to only once a person approved (INPUT_REQUIRED until then), and who may:
    `{members: [...], approvers: {roles, users}}`, or the short form `[finance]` (the default approvers)."""
    budget: TokenBudget | None = None
    """`{tokens: N}`: once a turn's members have reported N tokens, it ends FAILED (BudgetExceeded)."""
    routes: dict[str, str] = Field(default_factory=dict)
    """Static edges used only when an agent makes no decision."""
    history_length: int | None = Field(default=None, ge=0)
    timeout: float = Field(default=600.0, gt=0)
    """Seconds a whole turn may take when this team is itself a member of another team."""
    require_extensions: list[str] = Field(default_factory=list)

    @field_validator("approval", mode="before")
    @classmethod
    def _approval_list(cls, value: Any) -> Any:
        """The short form: a list of members, approved by the default approvers."""
        if isinstance(value, list):
            return {"members": value}
        if not isinstance(value, dict):
            raise ValueError("give a list of members, or {members: [...], approvers: {roles, users}}")
        return value

    @property
    def display_name(self) -> str:
        return self.name or self.id


_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
OFF_WORDS = ("off", "none", "never", "0", "")


def parse_duration(value: Any) -> float | None:
    """Seconds from `3600`, `"90s"`, `"15m"`, `"12h"`, `"30d"` or `"2w"`; None for `off` (and 0).
    Raises ValueError saying what is accepted."""
    if value is None or value is False:  # YAML reads a bare `off` as false
        return None
    if value is True:
        raise ValueError("a duration is seconds (3600) or 90s, 15m, 12h, 30d, 2w, or off")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip().lower()
        if text in OFF_WORDS:
            return None
        match = _DURATION.match(text)
        if match is None:
            raise ValueError(
                f"{value!r} is no duration: give seconds (3600) or 90s, 15m, 12h, 30d, 2w, or off"
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds < 0:
        raise ValueError(f"a duration is >= 0 seconds, not {value!r}")
    return seconds or None


Lifetime = Annotated[float | None, BeforeValidator(parse_duration)]
"""How long a stored row is kept once it is past use, in seconds (`30d` in YAML); None: for ever."""

PUSH_OUTBOX_MIN = 3600.0
"""The shortest lifetime of a push-outbox row: a webhook update may still be on its way before that."""
DEFAULT_PUSH_OUTBOX = 7 * 86400.0


class RetentionConfig(_Strict):
    """`retention:`: how long ranch keeps what is finished (docs/deploy.md, "Retention"). Each lifetime
    is off (kept for ever) unless given, but the push outbox's: its leftover rows are never read."""

    tasks: Lifetime = None
    """Finished tasks (completed, failed, canceled, rejected), from their last status change; with
    their push configs and, for a room's execution, its row. A running or input-required one stays."""
    events: Lifetime = None
    """Room events (the WebSocket's replay), from when they happened. Off: rooms are history."""
    messages: Lifetime = None
    """Room messages (and their handled deliveries), from when they were posted; one an agent has
    not handled yet stays. Off: rooms are history."""
    conversations: Lifetime = None
    """Team conversations and remote members' sessions idle that long, unless a task on their
    context is not finished (it waits for input, or runs)."""
    push_outbox: Lifetime = DEFAULT_PUSH_OUTBOX
    """Push-outbox rows held that long: sent but not released, or given up (at least 1 h)."""
    keys: Lifetime = None
    """API keys revoked, or expired, that long ago."""
    every: float = Field(default=600.0, ge=1.0)
    """Seconds between two pruning rounds (each on one replica); `10m` in YAML."""
    batch: int = Field(default=500, ge=1, le=10_000)
    """Rows deleted per transaction: small, so no prune holds a lock for long."""

    @field_validator("every", mode="before")
    @classmethod
    def _every(cls, value: Any) -> Any:
        seconds = parse_duration(value)
        if seconds is None:
            raise ValueError(
                "a round needs a period: give seconds or 10m, 1h (turn each lifetime off instead)"
            )
        return seconds

    @field_validator("push_outbox")
    @classmethod
    def _outbox_long_enough(cls, value: float | None) -> float | None:
        if value is not None and value < PUSH_OUTBOX_MIN:
            raise ValueError(f"at least {PUSH_OUTBOX_MIN:g} s (1h): an update may still be on its way")
        return value


class RanchConfig(_Strict):
    """The whole file."""

    agents: list[AgentConfig] = Field(default_factory=list)
    teams: list[TeamConfig] = Field(default_factory=list)
    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    """How long finished things are kept (docs/deploy.md, "Retention")."""

    def ids(self) -> list[str]:
        return [a.id for a in self.agents] + [t.id for t in self.teams]


def load_config(path: str | Path) -> RanchConfig:
    """Read, expand `${VAR}`s, validate and cross-check a config file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the file ({exc.strerror})"]) from exc
    return parse_config(text, source=str(path))


def parse_config(text: str, source: str = "<config>") -> RanchConfig:
    """Validate YAML text; raise ConfigError listing every problem found."""
    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError([f"{source}: not valid YAML: {exc}"]) from exc
    if not isinstance(raw, dict):
        raise ConfigError([f"{source}: the top level must be a mapping with `agents` and `teams`"])
    problems: list[str] = []
    raw = _expand_env(raw, problems, where="")
    unknown = sorted(set(raw) - {"agents", "teams", "retention"})
    if unknown:
        problems.append(
            f"{source}: unknown top-level key(s) {', '.join(unknown)}; expected agents, teams, retention"
        )
    agents = _validate_entries(raw, "agents", _AGENT_ADAPTER, problems)
    teams = _validate_entries(raw, "teams", _TEAM_ADAPTER, problems)
    retention = _validate_retention(raw.get("retention"), problems)
    config = RanchConfig(agents=agents, teams=teams, retention=retention)
    # entries that failed validation still count as defined, so no spurious "not defined" follows
    problems.extend(cross_check(config, also_defined=_raw_ids(raw)))
    if problems:
        raise ConfigError(problems)
    return config


def _validate_entries(
    raw: dict[str, Any], section: str, adapter: TypeAdapter[Any], problems: list[str]
) -> list[Any]:
    entries = raw.get(section) or []
    if not isinstance(entries, list):
        problems.append(f"config: `{section}` must be a list")
        return []
    valid = []
    for index, entry in enumerate(entries):
        try:
            valid.append(adapter.validate_python(entry))
        except ValidationError as exc:
            problems.extend(_describe(exc, section, index, entry))
    return valid


def _validate_retention(raw: Any, problems: list[str]) -> RetentionConfig:
    """The `retention:` section; each problem names its field (`retention.tasks: ...`)."""
    try:
        return RetentionConfig.model_validate(raw or {})
    except ValidationError as exc:
        problems.extend(retention_problems(exc))
        return RetentionConfig()


def retention_problems(exc: ValidationError, flagged: Collection[str] = ()) -> list[str]:
    """`retention.<field>: <why>` for each problem; `(--retention-<field>)` after the ones in `flagged`
    (given as a flag or an environment variable rather than in the file)."""
    problems = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"])
        flag = f" (--retention-{field.replace('_', '-')})" if field in flagged else ""
        why = error["msg"].removeprefix("Value error, ")
        problems.append(f"retention{'.' + field if field else ''}: {why}{flag}")
    return problems


def _raw_ids(raw: dict[str, Any]) -> set[str]:
    return {
        str(entry["id"])
        for section in ("agents", "teams")
        for entry in (raw.get(section) or [])
        if isinstance(entry, dict) and isinstance(entry.get("id"), str)
    }


def cross_check(config: RanchConfig, also_defined: set[str] | None = None) -> list[str]:
    """The checks a schema cannot express: uniqueness, membership, cycles, regexes."""
    known = set(config.ids()) | (also_defined or set())
    return [
        *_check_ids(config),
        *_check_teams(config, known),
        *_check_rules(config, known),
        *_check_llm(config),
        *_check_cycles(config),
    ]


def _check_ids(config: RanchConfig) -> Iterator[str]:
    seen: set[str] = set()
    for entity in [*config.agents, *config.teams]:
        if entity.id in RESERVED_IDS:
            yield f"{entity.id}: '{entity.id}' is reserved for routing and cannot be an id"
        if entity.id in seen:
            yield f"{entity.id}: duplicate id (ids are unique across agents and teams)"
        seen.add(entity.id)


def _check_teams(config: RanchConfig, known: set[str]) -> Iterator[str]:
    for team in config.teams:
        for member in team.members:
            if member not in known:
                yield f"{team.id}: member '{member}' is not a defined agent or team"
        if len(set(team.members)) != len(team.members):
            yield f"{team.id}: a member is listed twice"
        if team.default_agent not in team.members:
            yield f"{team.id}: default_agent '{team.default_agent}' is not a member"
        for source, target in team.routes.items():
            if source not in team.members:
                yield f"{team.id}: route from '{source}', which is not a member"
            if target not in team.members and target != "user":
                yield f"{team.id}: route '{source}' -> '{target}': '{target}' is not a member"
        for field, named in (("access", list(team.access)), ("approval", team.approval.members)):
            for member in named:
                if member not in team.members:
                    yield f"{team.id}: {field} names '{member}', which is not a member"


def _check_rules(config: RanchConfig, defined: set[str]) -> Iterator[str]:
    known = defined | RESERVED_IDS
    for agent in config.agents:
        if not isinstance(agent, RulesAgentConfig):
            continue
        for index, rule in enumerate(agent.rules):
            if rule.match is not None:
                try:
                    re.compile(rule.match)
                except re.error as exc:
                    yield f"{agent.id}: rules[{index}].match is not a valid regex: {exc}"
            if rule.route is not None and rule.route not in known:
                yield f"{agent.id}: rules[{index}].route '{rule.route}' is not an agent, team, user or sender"


def _check_llm(config: RanchConfig) -> Iterator[str]:
    for agent in config.agents:
        if not isinstance(agent, LlmAgentConfig):
            continue
        if agent.api_key_env is not None and agent.api_key_env not in os.environ:
            yield f"{agent.id}: api_key_env: environment variable {agent.api_key_env} is not set"
        names = [server.name for server in agent.mcp_servers]
        for name in sorted({n for n in names if names.count(n) > 1}):
            yield f"{agent.id}: mcp_servers: the name '{name}' is used twice"
        remote = [entry.name for entry in agent.remote_agents if not isinstance(entry, str) and entry.name]
        for name in sorted({n for n in remote if remote.count(n) > 1}):
            yield f"{agent.id}: remote_agents: the name '{name}' is used twice"


def _check_cycles(config: RanchConfig) -> Iterator[str]:
    teams = {team.id: team for team in config.teams}
    reported: set[str] = set()

    def visit(team_id: str, path: list[str]) -> Iterator[str]:
        for member in teams[team_id].members:
            if member in path:
                cycle = [*path[path.index(member) :], member]
                if cycle[0] not in reported:
                    reported.add(cycle[0])
                    yield f"{cycle[0]}: team contains itself ({' -> '.join(cycle)})"
            elif member in teams:
                yield from visit(member, [*path, member])

    for team_id in teams:
        yield from visit(team_id, [team_id])


def _expand_env(value: Any, problems: list[str], where: str) -> Any:
    if isinstance(value, str):

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in os.environ:
                problems.append(f"{where or 'config'}: environment variable {name} is not set")
                return ""
            return os.environ[name]

        return _ENV.sub(substitute, value)
    if isinstance(value, dict):
        owner = str(value["id"]) if isinstance(value.get("id"), str) else where
        return {k: _expand_env(v, problems, owner) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand_env(v, problems, where) for v in value]
    return value


def _describe(exc: ValidationError, section: str, index: int, entry: Any) -> list[str]:
    """Turn pydantic's errors into lines that start with the offending id."""
    has_id = isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]
    owner = str(entry["id"]) if has_id else f"{section}[{index}]"
    lines = []
    for error in exc.errors():
        loc = list(error["loc"])
        if loc and loc[0] in KINDS and section == "agents":
            loc = loc[1:]  # drop the discriminator tag pydantic inserts
        field = ".".join(str(part) for part in loc)
        message = error["msg"]
        if error["type"] == "union_tag_invalid":
            message = f"unknown kind {entry.get('kind')!r}; expected one of {', '.join(KINDS)}"
        elif error["type"] == "union_tag_not_found":
            message = f"missing `kind` ({', '.join(KINDS[:-1])} or {KINDS[-1]})"
        lines.append(f"{owner}: {field + ': ' if field else ''}{message}")
    return lines


_AGENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(cast(Any, AgentConfig))  # an Annotated union
_TEAM_ADAPTER: TypeAdapter[Any] = TypeAdapter(TeamConfig)
