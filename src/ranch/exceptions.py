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
  - AgentNotFound                a URL or config named an agent that does not exist
  - HubError                     a REST/WebSocket request the hub refuses (api/errors.py maps each to HTTP)
    - InvalidInput               a field has a wrong value or type (names the field)
    - Unauthenticated            no key, or an unknown one
    - Forbidden                  the caller may not do this in its organization
    - NotFound                   no such thing, or another tenant's (never told apart)
    - Conflict                   an id already taken, a closed room, a finished execution
    - Unprocessable              well-formed but refused (an unreadable remote card, a URL not allowed)

"You used ranch wrongly" (ConfigError, AgentNotFound) is kept apart from
"a peer misbehaved" (AgentError).
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

    def __init__(self, team: str, max_hops: int, trail: list[str]) -> None:
        self.team, self.max_hops, self.trail = team, max_hops, trail
        super().__init__(
            f"team '{team}' reached its hop limit (max_hops={max_hops}); trail: {' -> '.join(trail)}"
        )


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


class AgentNotFound(RanchError):
    """No agent or team with this id is served here."""

    def __init__(self, agent: str, known: list[str]) -> None:
        self.agent, self.known = agent, known
        super().__init__(f"no agent or team '{agent}' here (known: {', '.join(sorted(known)) or 'none'})")


class HubError(RanchError):
    """A hub request refused; `field` names the input at fault, when one is."""

    code = "invalid_request"

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class InvalidInput(HubError):
    code = "invalid_request"


class Unauthenticated(HubError):
    code = "unauthenticated"


class Forbidden(HubError):
    code = "forbidden"


class NotFound(HubError):
    code = "not_found"


class Conflict(HubError):
    code = "conflict"


class Unprocessable(HubError):
    code = "unprocessable"
