"""`kind: llm`: an OpenAI-compatible chat model that streams, uses tools and routes.

One `run` is a few rounds of: ask the model (its tokens become artifact updates,
appended to one artifact as they arrive), then answer the tools it called. Each
tool call and result is a WORKING status whose message carries one data part and
`metadata["ranch.message_type"]` = `tool_call` / `tool_result` (docs/llm.md), so
they land in the task's history. The run ends when the model answers without
calling a tool, or answers and routes in the same breath, or hands the work off,
or has used `max_tool_rounds` (the last round may not call tools). The final
status is COMPLETED with the whole answer as its message, carrying the `route_to`
decision when the model made one, or the `hand_off` it asked for in a room. Each
(owner, caller context) keeps its own short memory of what was asked and answered.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.types import (
    Artifact,
    Message,
    Part,
    Role,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Value

from ranch.agents.base import Agent, AgentInfo, Call, Event, reply
from ranch.agents.llm.mcp import ToolResult
from ranch.agents.llm.provider import ChatProvider, Completion, ToolCall, Usage
from ranch.agents.llm.remote_tool import RemoteAgentTool
from ranch.agents.llm.tools import HAND_OFF, ROUTE_TO, Toolbox, hand_off, route
from ranch.ids import new_id
from ranch.utils.lru import Lru
from ranch.wire import client_routing, keys
from ranch.wire.modes import ANY, media_type_of, takes

MESSAGE_TYPE_KEY = "ranch.message_type"
"""Metadata key naming what a status message records: `tool_call` or `tool_result`."""
TOOL_CALL = "tool_call"
TOOL_RESULT = "tool_result"
MEMORY_CONTEXTS = 1_000
MEMORY_MESSAGES = 40
"""Messages (asked and answered) remembered per caller context."""
MEMORY_CONTEXT_BYTES = 512_000
"""Bytes of text remembered per caller context; the oldest exchanges go first."""
MEMORY_BYTES = 32_000_000
"""Bytes of text remembered for all contexts of one agent; the least recently used go first."""
MAX_IMAGE_BYTES = 5_000_000
"""Largest image the agent reads from a URL for its model."""
IMAGE_TIMEOUT_S = 20.0
IMAGE_FAILURES = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, ValueError)
"""What reading an image URL may raise: a refused address, a closed or silent port, an HTTP error..."""

logger = logging.getLogger(__name__)


class LlmAgent(Agent):
    """A chat model behind an OpenAI-compatible URL; declares the client-routing extension."""

    streams_text = True

    def __init__(
        self,
        info: AgentInfo,
        provider: ChatProvider,
        toolbox: Toolbox,
        *,
        system_prompt: str = "You are a helpful assistant.",
        max_tool_rounds: int = 8,
        fetch: Callable[[], httpx.AsyncClient] | None = None,
    ) -> None:
        self.id = info.id
        self._info = info
        self._fetch = fetch
        """Opens the client that reads the images a message gives by URL: a guarded one
        (policy/egress.py), since the URL is the caller's; None: such images are named, not shown."""
        self._fetcher: httpx.AsyncClient | None = None
        """That client, opened on the first image URL and closed with the agent."""
        self.provider = provider
        self.toolbox = toolbox
        self.system_prompt = system_prompt
        self.max_tool_rounds = max_tool_rounds
        self.memory = ChatMemory()
        """What each (owner, context) asked and was answered, bounded."""
        self.resume = "skip" if toolbox.servers or toolbox.remote is not None else "rerun"
        """A model without tools answers again with no effect elsewhere; one with tools may have acted."""

    @property
    def allowed_remote_urls(self) -> frozenset[str]:
        """A2A agents `call_remote_agent` may reach; assign a subset to narrow it."""
        remote = self.toolbox.remote
        return remote.allowed if remote is not None else frozenset()

    @allowed_remote_urls.setter
    def allowed_remote_urls(self, urls: frozenset[str]) -> None:
        remote: RemoteAgentTool | None = self.toolbox.remote
        if remote is not None:
            remote.allowed = frozenset(url.rstrip("/") for url in urls) & frozenset(remote.targets)

    async def info(self) -> AgentInfo:
        return self._info

    async def _asking(self, message: Message, asked: str) -> dict[str, Any]:
        """The user's chat message: the text, with the images a vision model takes (its input modes
        list their type) as `image_url` items. An image given by URL is read by the agent, through
        guarded connections (the URL is the caller's), and sent as bytes: a provider is never handed
        a URL to fetch from wherever it runs."""
        items: list[dict[str, Any]] = []
        notes: list[str] = []
        for part in message.parts:
            media_type = media_type_of(part)
            if part.WhichOneof("content") not in ("raw", "url") or not media_type.startswith("image/"):
                continue
            if not any(takes(mode, media_type) and mode != ANY for mode in self._info.input_modes):
                continue
            try:
                url = await self._image_url(part, media_type)
            except IMAGE_FAILURES as exc:
                # one note for every failure: the model (and through it the caller) never learns
                # whether a port is closed, open, or refused by the guard
                logger.debug("agent %s: the image at %s was not read: %s", self.id, *_failure(part.url, exc))
                notes.append(f"[the image {part.url} could not be read]")
                continue
            items.append({"type": "image_url", "image_url": {"url": url}})
        text = "\n\n".join([asked, *notes]) if notes else asked
        if not items:
            return _chat("user", text)
        return {"role": "user", "content": [*([{"type": "text", "text": text}] if text else []), *items]}

    async def _image_url(self, part: Part, media_type: str) -> str:
        """An image part as a chat model reads it: its bytes as a `data:` URL."""
        data = part.raw
        if part.HasField("url"):
            async with self._image_client().stream("GET", part.url, timeout=IMAGE_TIMEOUT_S) as response:
                response.raise_for_status()
                data = b""
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > MAX_IMAGE_BYTES:
                        raise ValueError(f"larger than {MAX_IMAGE_BYTES} bytes")
        return f"data:{media_type};base64,{base64.b64encode(data).decode()}"

    def _image_client(self) -> httpx.AsyncClient:
        if self._fetch is None:
            raise ValueError("this agent reads no image URLs")
        if self._fetcher is None:
            self._fetcher = self._fetch()
        return self._fetcher

    async def open(self) -> None:
        await self.toolbox.open()

    async def aclose(self) -> None:
        await self.toolbox.aclose()
        await self.provider.aclose()
        if self._fetcher is not None:
            await self._fetcher.aclose()
            self._fetcher = None

    async def __aenter__(self) -> LlmAgent:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        deadline = time.monotonic() + self.timeout
        routing = client_routing.read_request(message)
        in_room = keys.MESSAGE in message.metadata.fields  # a room's delivery: `hand_off` is offered
        tools = await self.toolbox.specs(routing, in_room=in_room)
        asked = _render(message)
        memory_key = (call.owner, message.context_id)  # another owner's same contextId shares nothing
        chat = [self._system(routing), *self.memory.recall(memory_key), await self._asking(message, asked)]
        stream = _ArtifactStream(message)
        answers: list[str] = []
        decision: client_routing.RoutingDecision | None = None
        handoff: client_routing.Handoff | None = None
        usage: Usage | None = None
        for round_number in range(self.max_tool_rounds + 1):
            completion = Completion()
            last = round_number == self.max_tool_rounds
            async for item in self.provider.complete(chat, tools, tools_allowed=not last, deadline=deadline):
                if isinstance(item, str):
                    yield stream.delta(item)
                else:
                    completion = item
            if completion.usage is not None:
                usage = completion.usage + usage
            if completion.text:
                answers.append(completion.text)
            if last or not completion.tool_calls:
                break
            chat.append(_assistant(completion))
            for tool_call in completion.tool_calls:
                if tool_call.name == ROUTE_TO:
                    result, chosen = route(tool_call.arguments, routing)
                    decision = chosen or decision
                elif tool_call.name == HAND_OFF:
                    result, wanted = hand_off(tool_call.arguments, in_room)
                    handoff = wanted or handoff
                else:
                    yield _note(message, TOOL_CALL, _call_data(tool_call))
                    result = await self.toolbox.call(
                        tool_call.name, tool_call.arguments, message.context_id, call.owner
                    )
                    yield _note(message, TOOL_RESULT, _result_data(tool_call, result), result.structured)
                chat.append({"role": "tool", "tool_call_id": tool_call.id, "content": result.text})
            if (decision is not None and completion.text) or handoff is not None:
                break  # (a handoff ends the turn: the agent waits for the other's result)
        text = "\n\n".join(answers) or (decision.reason or "" if decision is not None else "")
        self.memory.remember(memory_key, asked, text)
        if stream.started:
            yield stream.whole(text)
        answer = reply(message, text, decision)
        if handoff is not None:
            client_routing.attach_handoff(answer, handoff)
        if usage is not None:  # what this answer cost, for a team's budget (docs/routing.md, "Budgets")
            client_routing.attach_usage(answer, usage.to_json())
        yield TaskStatusUpdateEvent(
            task_id=message.task_id,
            context_id=message.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=answer),
        )

    def _system(self, routing: client_routing.RoutingRequest | None) -> dict[str, Any]:
        if routing is None:
            return _chat("system", self.system_prompt)
        peers = "\n".join(
            f"- {card.id} ({card.name}): {card.description}"
            + (f" [skills: {', '.join(card.capabilities)}]" if card.capabilities else "")
            for card in routing.agent_cards
        )
        team = (
            f"You work in a team. This message comes from '{routing.sender}'. "
            f"Your peers:\n{peers or '- none'}\n"
            f"When someone else should act next, call {ROUTE_TO} with their id ('user' answers the user, "
            "'sender' answers whoever sent this message) and a short reason, "
            "and write your message for them. "
            f"If you do not call {ROUTE_TO}, the team decides who goes next."
        )
        return _chat("system", f"{self.system_prompt}\n\n{team}")


class ChatMemory:
    """Each (owner, context)'s exchanges with the model, bounded in messages and bytes per context,
    and in contexts and bytes for the agent (the least recently used go first)."""

    def __init__(
        self,
        max_contexts: int = MEMORY_CONTEXTS,
        max_messages: int = MEMORY_MESSAGES,
        per_context: int = MEMORY_CONTEXT_BYTES,
        max_bytes: int = MEMORY_BYTES,
    ) -> None:
        self.max_contexts = max_contexts
        self.max_messages = max_messages
        self.per_context = min(per_context, max_bytes)
        self.max_bytes = max_bytes
        self._contexts: Lru[tuple[str, str], tuple[list[dict[str, Any]], int]] = Lru(max_contexts, max_bytes)

    @property
    def size(self) -> int:
        """UTF-8 bytes of every remembered message's content."""
        return self._contexts.size

    def recall(self, key: tuple[str, str]) -> list[dict[str, Any]]:
        held = self._contexts.peek(key)
        return list(held[0]) if held is not None else []

    def remember(self, key: tuple[str, str], asked: str, answered: str) -> None:
        if not key[1]:
            return
        messages, size = self._contexts.pop(key) or ([], 0)
        half = self.per_context // 2  # one exchange alone larger than a context's share is cut
        for role, content in (("user", asked), ("assistant", answered)):
            if len(content.encode()) > half:
                content = content.encode()[:half].decode(errors="ignore")
            messages.append(_chat(role, content))
            size += len(content.encode())
        while messages and (len(messages) > self.max_messages or size > self.per_context):
            size -= len(messages.pop(0)["content"].encode())
        self._contexts.put(key, (messages, size), size)

    def __len__(self) -> int:
        return len(self._contexts)


@dataclass
class _ArtifactStream:
    """The answer's tokens as updates of one artifact: the first creates it, the rest append."""

    request: Message
    artifact_id: str = ""
    started: bool = False

    def __post_init__(self) -> None:
        self.artifact_id = self.artifact_id or new_id()

    def delta(self, text: str) -> TaskArtifactUpdateEvent:
        event = self._event([Part(text=text)], append=self.started, last=False)
        self.started = True
        return event

    def whole(self, text: str) -> TaskArtifactUpdateEvent:
        """The finished answer replaces the token pieces with one part."""
        return self._event([Part(text=text)], append=False, last=True)

    def _event(self, parts: list[Part], *, append: bool, last: bool) -> TaskArtifactUpdateEvent:
        return TaskArtifactUpdateEvent(
            task_id=self.request.task_id,
            context_id=self.request.context_id,
            artifact=Artifact(artifact_id=self.artifact_id, name="answer", parts=parts),
            append=append,
            last_chunk=last,
        )


def _note(
    request: Message, kind: str, data: dict[str, Any], structured: dict[str, Any] | None = None
) -> TaskStatusUpdateEvent:
    """A WORKING status recording a tool call or result (docs/llm.md); a tool's structured result
    follows as a second data part."""
    note = Message(
        message_id=new_id(),
        role=Role.ROLE_AGENT,
        context_id=request.context_id,
        task_id=request.task_id,
        parts=[Part(data=ParseDict(data, Value()))],
    )
    if structured is not None:
        note.parts.append(Part(data=ParseDict(structured, Value())))
    note.metadata.update({MESSAGE_TYPE_KEY: kind})
    return TaskStatusUpdateEvent(
        task_id=request.task_id,
        context_id=request.context_id,
        status=TaskStatus(state=TaskState.TASK_STATE_WORKING, message=note),
    )


def _call_data(call: ToolCall) -> dict[str, Any]:
    try:
        arguments: Any = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        arguments = call.arguments
    return {"call_id": call.id, "name": call.name, "arguments": arguments}


def _result_data(call: ToolCall, result: ToolResult) -> dict[str, Any]:
    return {"call_id": call.id, "name": call.name, "result": result.text, "is_error": result.is_error}


def _render(message: Message) -> str:
    """The incoming message as the model reads it (the Router's context part comes first already)."""
    pieces: list[str] = []
    for part in message.parts:
        if part.HasField("text"):
            pieces.append(part.text)
        elif part.HasField("data"):
            pieces.append(json.dumps(MessageToDict(part.data)))
        elif part.filename or part.url:
            pieces.append(f"[file: {part.filename or part.url}]")
    return "\n\n".join(pieces)


def _failure(url: str, exc: Exception) -> tuple[str, str]:
    """The unread image's URL and why, for the server's log: without its query or credentials (they
    may hold a token)."""
    try:
        parts = urlsplit(url)
        shown = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
    except ValueError:
        shown = "an unreadable URL"
    why = f"HTTP {exc.response.status_code}" if isinstance(exc, httpx.HTTPStatusError) else str(exc)
    return shown, f"{type(exc).__name__}: {why.replace(url, shown)}"


def _chat(role: str, content: str) -> dict[str, Any]:
    return {"role": role, "content": content}


def _assistant(completion: Completion) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": completion.text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments or "{}"}}
            for c in completion.tool_calls
        ],
    }
