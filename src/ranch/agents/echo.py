"""`kind: echo`: replies with what it got (text, files and data) and makes no routing decision."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from a2a.types import Message

from ranch.agents.base import Agent, AgentInfo, Call, Event, content_parts, reply, text_of


class EchoAgent(Agent):
    """The simplest deterministic agent; it does not declare client routing."""

    replies_directly = True
    resume = "rerun"

    def __init__(self, info: AgentInfo) -> None:
        self.id = info.id
        self._info = info

    async def info(self) -> AgentInfo:
        return self._info

    def reply_now(self, message: Message, call: Call) -> Message:
        text = text_of(message)
        answer = reply(message, text)
        if len(message.parts) > 1 or not text:  # files or data besides (or instead of) text
            media = [part for part in content_parts(message) if not part.HasField("text")]
            if not text:
                del answer.parts[:]
            answer.parts.extend(media)
        return answer

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        yield self.reply_now(message, call)
