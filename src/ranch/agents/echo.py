"""`kind: echo`: replies with the text it got and makes no routing decision."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from a2a.types import Message

from ranch.agents.base import Agent, AgentInfo, Call, Event, reply, text_of


class EchoAgent(Agent):
    """The simplest deterministic agent; it does not declare client routing."""

    replies_directly = True

    def __init__(self, info: AgentInfo) -> None:
        self.id = info.id
        self._info = info

    async def info(self) -> AgentInfo:
        return self._info

    def reply_now(self, message: Message, call: Call) -> Message:
        return reply(message, text_of(message))

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        yield self.reply_now(message, call)
