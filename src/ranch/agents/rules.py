"""`kind: rules`: regex rules with reply templates and routing decisions.

The first rule whose `match` is found in the incoming text answers. In the reply,
`{text}` is the incoming text and `{name}` is the match's named group `name`. A
rule with `route` answers with that routing decision. With no matching rule the
agent says so and decides nothing.

Rules run inside the request, on the event loop, so a regex that backtracks
without end would freeze the whole server. The operator's config file compiles
with Python's `re`; rules that come from tenants (registered over the REST API)
compile with RE2 (`compile_tenant`), which matches in linear time and refuses what
would need backtracking (lookarounds, backreferences).
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import re2
from a2a.types import Message

from ranch.agents.base import Agent, AgentInfo, Call, Event, reply, text_of
from ranch.exceptions import Unprocessable
from ranch.wire import client_routing

NO_MATCH_REPLY = "I have no rule for that."
MAX_TENANT_PATTERN = 1_000
"""Longest `match` (in characters) a tenant may register."""


class Found(Protocol):
    def groupdict(self) -> dict[str, Any]: ...


class Pattern(Protocol):
    """A compiled regex: Python's `re` (config file) or RE2 (tenants)."""

    def search(self, text: str) -> Found | None: ...


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is the caller's error (422), not a log line


def compile_tenant(pattern: str, field: str) -> Pattern:
    """A tenant's regex on RE2 (linear time); Unprocessable naming `field` when it cannot be."""
    if len(pattern) > MAX_TENANT_PATTERN:
        raise Unprocessable(f"{field} is longer than {MAX_TENANT_PATTERN} characters", field)
    try:
        compiled: Pattern = re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else exc
        raise Unprocessable(
            f"{field} cannot be used: registered rules run on RE2 (linear time), which has no "
            f"lookarounds or backreferences: {reason}",
            field,
        ) from exc
    return compiled


@dataclass(frozen=True)
class Rule:
    pattern: Pattern | re.Pattern[str] | None
    reply: str
    route: str | None = None
    reason: str | None = None

    def answer(self, text: str) -> str | None:
        """The filled-in reply when this rule matches `text`, else None."""
        found = self.pattern.search(text) if self.pattern is not None else None
        if self.pattern is not None and found is None:
            return None
        values = {"text": text, **{k: v or "" for k, v in (found.groupdict() if found else {}).items()}}
        answer = self.reply
        for key, value in values.items():
            answer = answer.replace("{" + key + "}", value)
        return answer


class RulesAgent(Agent):
    """Deterministic routing agent; declares the client-routing extension."""

    replies_directly = True
    resume = "rerun"

    def __init__(self, info: AgentInfo, rules: Sequence[Rule]) -> None:
        self.id = info.id
        self._info = info
        self._rules = tuple(rules)

    async def info(self) -> AgentInfo:
        return self._info

    def reply_now(self, message: Message, call: Call) -> Message:
        text = text_of(message)
        for rule in self._rules:
            answer = rule.answer(text)
            if answer is not None:
                decision = None
                if rule.route is not None:
                    decision = client_routing.RoutingDecision(recipient=rule.route, reason=rule.reason)
                return reply(message, answer, decision)
        return reply(message, NO_MATCH_REPLY)

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        yield self.reply_now(message, call)
