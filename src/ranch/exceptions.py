"""ranch's errors, one tree, so callers can catch at the level they care about.

- RanchError
  - ConfigError                  the configuration is wrong (`ranch check` lists these)
  - RoutingError                 a team could not complete a turn
    - InvalidRecipient           an agent named itself or a non-member
    - HopLimitExceeded           the turn used up `max_hops`
  - AgentError                   a member misbehaved or was unreachable
    - AgentTimeout               no answer within the member's `timeout`
    - AgentUnavailable           connection refused, DNS failure, HTTP error
    - InvalidAgentReply          the answer was not valid A2A
      - ReplyTooLarge            the answer was larger than `max_reply_bytes`
  - AgentNotFound                a URL or config named an agent that does not exist
  - PolicyError                  a request broke one of the server's policies (docs/policies.md)
    - InvalidInput               a field is missing, mistyped or malformed
      - UnsafeUrl                an outbound URL (push webhook) points somewhere ranch will not call
    - PayloadTooLarge            message content over `max_message_bytes`
    - BodyTooLarge               request body over `max_body_bytes`
    - RateLimited                the caller or the agent used up its token bucket
    - Unauthorized               no or bad credentials
    - Forbidden                  credentials fine, access not
    - NotFound                   no such room, execution, delivery... or another tenant's (never told apart)
    - Conflict                   an id already taken, a closed room, a finished execution
    - Unprocessable              well-formed but refused (an unreadable remote card, a URL not allowed)
    - SessionExpired             the session's TTL has passed
    - ServerBusy                 a server-wide limit of concurrent work is reached; try again shortly
  - ExtensionSupportRequired     an agent requires an extension the request did not name
  - ToolError                    a tool server (MCP) could not be reached or listed
  - StoreUnavailable             the task store did not take a write; that outcome is not reported
    - DatabaseUnavailable        a request could not read or write the database; nothing was changed

"You used ranch wrongly" (ConfigError, AgentNotFound, PolicyError) is kept apart from
"a peer misbehaved" (AgentError). wire/errors.py maps each to one JSON-RPC code and
one HTTP status, the same on every binding (docs/errors.md).
"""

from __future__ import annotations


class RanchError(Exception):
    """Base of every error ranch raises on purpose."""


class ConfigError(RanchError):
    """One or more problems in a configuration file, each naming the id it concerns."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


class RoutingError(RanchError):
    """A team turn could not be completed."""


class InvalidRecipient(RoutingError):
    """An agent named a recipient that is not a peer (itself, or an unknown id)."""

    def __init__(self, agent: str, recipient: str, team: str) -> None:
        self.agent, self.recipient, self.team = agent, recipient, team
        why = "itself" if recipient == agent else f"'{recipient}', which is not a member of team '{team}'"
        super().__init__(f"agent '{agent}' named {why} as the next recipient")


class HopLimitExceeded(RoutingError):
    """The turn reached `max_hops` before an agent answered the user."""

    def __init__(self, team: str, max_hops: int, trail: list[str], *, inherited: bool = False) -> None:
        self.team, self.max_hops, self.trail = team, max_hops, trail
        limit = f"the {max_hops} hops its caller had left" if inherited else f"max_hops={max_hops}"
        super().__init__(f"team '{team}' reached its hop limit ({limit}); trail: {' -> '.join(trail)}")


class BudgetExceeded(RoutingError):
    """A team's turn spent its token budget (`budget.tokens`) before an agent answered the user."""

    def __init__(self, team: str, spent: int, limit: int, ledger: list[str]) -> None:
        self.team, self.spent, self.limit = team, spent, limit
        super().__init__(
            f"team '{team}' spent {spent} tokens of its budget of {limit}; the turn stopped there "
            f"({', '.join(ledger)})"
        )


class RoutingLoop(RoutingError):
    """Members passed a turn back and forth with nothing new (a team's `on_loop: fail`)."""

    def __init__(self, team: str, edge: str, repeats: int, seen: str | None = None) -> None:
        self.team, self.edge, self.repeats = team, edge, repeats
        seen = seen or f"{edge} came {repeats} times with the same text"  # `seen`: a cycle, no progress
        super().__init__(f"team '{team}' stopped a loop: {seen} (on_loop: fail)")


class AgentError(RanchError):
    """A member agent failed to produce a usable answer."""

    def __init__(self, agent: str, message: str) -> None:
        self.agent = agent
        super().__init__(f"agent '{agent}': {message}")


class AgentTimeout(AgentError):
    """The member did not finish within its timeout."""

    def __init__(self, agent: str, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(agent, f"no answer within its timeout of {seconds:g}s")


class AgentUnavailable(AgentError):
    """The member could not be reached or answered with an HTTP/A2A error."""


class InvalidAgentReply(AgentError):
    """The member answered with something that is not valid A2A."""


class ReplyTooLarge(InvalidAgentReply):
    """The member's reply (or one body it sent) was larger than the hub reads."""

    def __init__(self, agent: str, limit: int) -> None:
        self.limit = limit
        super().__init__(agent, f"its reply is larger than the limit of {limit} bytes (max_reply_bytes)")


class AgentNotFound(RanchError):
    """No agent or team with this id is served here."""

    def __init__(self, agent: str, known: list[str]) -> None:
        self.agent, self.known = agent, known
        super().__init__(
            f"no agent or team '{agent}' is served here (known: {', '.join(sorted(known)) or 'none'})"
        )


class PolicyError(RanchError):
    """A request broke one of the server's policies; `field` names the part at fault, if any."""

    field: str | None = None

    def __init__(self, message: str = "", field: str | None = None) -> None:
        if field is not None:
            self.field = field
        super().__init__(message)


class InvalidInput(PolicyError):
    """A field is missing, has the wrong type, or is malformed."""

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class UnsafeUrl(InvalidInput):
    """An outbound URL resolves to an address ranch refuses to call (loopback, private, metadata ...)."""

    def __init__(self, url: str, reason: str, field: str | None = "url") -> None:
        self.url, self.reason = url, reason
        super().__init__(f"refusing to call {url}: {reason}", field)


class PayloadTooLarge(PolicyError):
    """Message content larger than the configured limit."""

    def __init__(self, size: int, limit: int, field: str | None = "message") -> None:
        self.size, self.limit, self.field = size, limit, field
        super().__init__(
            f"{field} has {size} bytes of content; the limit is {limit} bytes (max_message_bytes)"
        )


class UnsupportedContent(PolicyError):
    """A part of a media type the receiving agent's input modes do not take."""

    def __init__(self, agent: str, media_type: str, modes: list[str], field: str | None = None) -> None:
        self.agent, self.media_type, self.field = agent, media_type, field
        super().__init__(
            f"{field or 'a part'} is {media_type}, which agent '{agent}' does not take "
            f"(its input modes: {', '.join(modes)})"
        )


class BodyTooLarge(PolicyError):
    """A request body larger than the configured limit."""

    def __init__(self, size: int, limit: int) -> None:
        self.size, self.limit = size, limit
        super().__init__(f"request body of {size} bytes exceeds the limit of {limit} bytes")


class RateLimited(PolicyError):
    """A token bucket is empty; `retry_after` is how long until one token is back, in seconds."""

    def __init__(self, key: str, retry_after: float) -> None:
        self.key, self.retry_after = key, retry_after
        super().__init__(f"rate limit reached for {key}; retry after {retry_after:.3g}s")


class Unauthorized(PolicyError):
    """No credentials, or credentials that are not valid."""


class Forbidden(PolicyError):
    """Valid credentials that do not grant access to this resource."""


class NotFound(PolicyError):
    """Nothing with this id that the caller may see (another tenant's things look absent)."""


class Conflict(PolicyError):
    """The request clashes with the current state: an id taken, a room closed, an execution ended."""


class Unprocessable(PolicyError):
    """Well-formed but refused: a remote agent whose card cannot be read, a URL not allowed."""


class SessionExpired(PolicyError):
    """The session's time to live has passed; start a new one."""


class ServerBusy(PolicyError):
    """The process is at a limit of concurrent work over every caller (page reads): try again soon."""

    retry_after: float = 1
    """Seconds to wait before asking again (`Retry-After`)."""


class ExtensionSupportRequired(RanchError):
    """An agent requires extensions the request did not name in `A2A-Extensions`."""

    def __init__(self, agent: str, missing: list[str]) -> None:
        self.agent, self.missing = agent, missing
        super().__init__(
            f"agent '{agent}' requires extension(s) {', '.join(missing)}; "
            "name them in the A2A-Extensions header"
        )


class ToolError(RanchError):
    """A tool source failed as a whole (an MCP server that cannot be started or reached)."""


class StoreUnavailable(RanchError):
    """The task store refused a write (a locked or unreachable database) after its retries.

    A task's state is reported only once it is stored, so the caller gets this error instead.
    """

    retry_after: float = 1
    """Seconds to wait before sending again (`Retry-After`): a lock is held briefly, a database restarts."""

    def __init__(self, task_id: str, state: str, cause: str) -> None:
        self.task_id, self.state = task_id, state
        super().__init__(
            f"task {task_id} could not be stored as {state} ({cause}); "
            "its outcome is not reported because it was not kept: send the message again"
        )


class DatabaseUnavailable(StoreUnavailable):
    """A request could not read or write the database (locked, unreachable, its connection cut).

    Its transaction was rolled back, so nothing it asked for was changed: it may be sent again.
    """

    def __init__(self, cause: str) -> None:
        self.task_id, self.state, self.cause = "", "", cause
        RanchError.__init__(self, f"the database is unavailable ({cause}); nothing was changed: try again")
