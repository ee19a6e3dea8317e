"""`kind: rules`: regex rules with reply templates and routing decisions.

The first rule whose `match` is found in the incoming text answers. In the reply,
`{text}` is the incoming text and `{name}` is the match's named group `name`. A
rule with `route` answers with that routing decision. With no matching rule the
agent says so and decides nothing.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from a2a.types import Message

from ranch.agents.base import Agent, AgentInfo, Call, Event, reply, text_of
from ranch.routing import extension

NO_MATCH_REPLY = "I have no rule for that."


@dataclass(frozen=True)
class Rule:
    pattern: re.Pattern[str] | None
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
                    decision = extension.RoutingDecision(recipient=rule.route, reason=rule.reason)
                return reply(message, answer, decision)
        return reply(message, NO_MATCH_REPLY)

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        yield self.reply_now(message, call)
