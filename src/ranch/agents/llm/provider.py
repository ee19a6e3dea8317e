"""One OpenAI-compatible chat endpoint, through the official `openai` client.

`ChatProvider.complete` sends one chat request and yields the answer's text as
it streams in, then one `Completion` with the whole text and any tool calls
(assembled from their streamed fragments). The client's own retries are off:
ranch retries 429s, 5xx answers and refused connections itself, honouring
`Retry-After` (capped) and otherwise backing off exponentially, and never past
the agent's deadline. Only the request is retried, never a stream that already
produced text. A tenant's provider gets an `http_client` whose connections
the guard judges (a refused address is not retried) and which follows no
redirect (openai's own client does). Failures become `AgentError`s that name
the agent, the provider URL and the provider's own message; the API key is
scrubbed from all of them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import openai
from openai import AsyncOpenAI

from ranch.exceptions import AgentError, AgentUnavailable, InvalidAgentReply
from ranch.policy.egress import RefusedConnection
from ranch.utils.backoff import Backoff, retry_after

logger = logging.getLogger(__name__)

RETRIES = Backoff(first=0.5, longest=8.0, jitter=False, longest_asked=30.0, at_least_backoff=False)
"""Without a Retry-After: 0.5 s before the first retry, doubled each time, at most 8 s. A provider's
Retry-After is waited as asked, up to 30 s (a provider asking for more gets this)."""
NO_KEY = "no-key"
"""What the openai client is built with when no key is configured (it refuses none); it is never
sent: such requests go without an Authorization header (`ChatProvider.unauthenticated`)."""


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: str
    """The JSON text the model wrote (not parsed: it may be invalid)."""


@dataclass
class Completion:
    """One model answer: its text and the tools it wants called."""

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None = None
    """Tokens the model reported for this answer (`usage`), when it did."""


@dataclass(frozen=True)
class Usage:
    """Tokens one or more model calls took, as the provider reported them."""

    input: int = 0
    output: int = 0

    @property
    def total(self) -> int:
        return self.input + self.output

    def __add__(self, other: Usage | None) -> Usage:
        return self if other is None else Usage(self.input + other.input, self.output + other.output)

    def to_json(self) -> dict[str, int]:
        """The client-routing extension's `usage` field (docs/routing.md, "Budgets")."""
        return {"inputTokens": self.input, "outputTokens": self.output, "totalTokens": self.total}


def _usage(reported: Any) -> Usage | None:
    if reported is None:
        return None
    return Usage(
        int(getattr(reported, "prompt_tokens", 0) or 0), int(getattr(reported, "completion_tokens", 0) or 0)
    )


@dataclass
class Sampling:
    """The request parameters that shape the answer."""

    model: str
    temperature: float | None = None
    max_tokens: int | None = None
    stream: bool = True


class ChatProvider:
    """Chat completions for one agent: retries, streaming assembly, error translation."""

    def __init__(
        self,
        agent_id: str,
        sampling: Sampling,
        *,
        base_url: str,
        api_key: str | None = None,
        headers: dict[str, str] | None = None,
        retry_count: int = 3,
        request_timeout: float = 60.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.agent_id = agent_id
        self.sampling = sampling
        self.base_url = base_url.rstrip("/")
        self.retry_count = retry_count
        self.request_timeout = request_timeout
        self._key = api_key or ""
        own_auth = any(name.lower() == "authorization" for name in headers or {})
        self.unauthenticated: dict[str, Any] = (
            {} if api_key or own_auth else {"extra_headers": {"Authorization": openai.omit}}
        )
        """No key and no Authorization header configured: each request omits the header, rather
        than carry `Bearer no-key` to a local server or a proxy that logs it (docs/llm.md)."""
        self._client = AsyncOpenAI(
            api_key=api_key or NO_KEY,
            base_url=self.base_url,
            max_retries=0,
            timeout=request_timeout,
            default_headers=headers or None,
            http_client=http_client,  # a tenant's: guarded, no redirects; None = openai's own
        )

    def __repr__(self) -> str:  # never the key
        return f"ChatProvider({self.agent_id!r}, {self.sampling.model!r} at {self.base_url})"

    async def aclose(self) -> None:
        await self._client.close()

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        *,
        tools_allowed: bool = True,
        deadline: float | None = None,
    ) -> AsyncIterator[str | Completion]:
        """Yield text deltas as they arrive, then the whole `Completion`."""
        request: dict[str, Any] = {"model": self.sampling.model, "messages": messages, **self.unauthenticated}
        if tools:
            request["tools"] = tools
            if not tools_allowed:
                request["tool_choice"] = "none"
        if self.sampling.temperature is not None:
            request["temperature"] = self.sampling.temperature
        if self.sampling.max_tokens is not None:
            request["max_tokens"] = self.sampling.max_tokens
        if not self.sampling.stream:
            response = await self._with_retries(request, deadline)
            completion = _from_message(response.choices[0].message if response.choices else None)
            completion.usage = _usage(getattr(response, "usage", None))
            if completion.text:
                yield completion.text
            yield completion
            return
        streaming = {**request, "stream": True, "stream_options": {"include_usage": True}}
        stream = await self._with_retries(streaming, deadline)
        calls: dict[int, ToolCall] = {}
        text: list[str] = []
        usage: Usage | None = None
        try:
            async with stream:
                async for chunk in stream:
                    usage = _usage(getattr(chunk, "usage", None)) or usage  # the last chunk's, if sent
                    for choice in chunk.choices[:1]:
                        if choice.delta.content:
                            text.append(choice.delta.content)
                            yield choice.delta.content
                        _add_fragments(calls, choice.delta.tool_calls or [])
        except (openai.OpenAIError, httpx.HTTPError) as exc:
            raise self._translate(exc, attempts=1) from exc
        yield Completion(
            text="".join(text), tool_calls=[calls[index] for index in sorted(calls)], usage=usage
        )

    async def _with_retries(self, request: dict[str, Any], deadline: float | None) -> Any:
        """Send the request; retry what is worth retrying while the deadline allows."""
        attempt = 0
        while True:
            try:
                return await self._client.chat.completions.create(**request)
            except openai.OpenAIError as exc:
                delay = self._retry_delay(exc, attempt)
                late = deadline is not None and delay is not None and time.monotonic() + delay >= deadline
                if delay is None or attempt >= self.retry_count or late:
                    raise self._translate(exc, attempts=attempt + 1) from exc
                attempt += 1
                logger.warning(
                    "llm %s: %s; retry %d/%d in %.1fs",
                    self.agent_id,
                    self._scrub(_summary(exc)),
                    attempt,
                    self.retry_count,
                    delay,
                )
                await anyio.sleep(delay)

    def _retry_delay(self, exc: openai.OpenAIError, attempt: int) -> float | None:
        """Seconds to wait before retrying `exc`, or None when it is not worth retrying."""
        backoff = RETRIES.base(attempt)
        if isinstance(exc, openai.APITimeoutError):
            return None  # another full timeout would likely pass the agent's own
        if isinstance(exc, openai.APIConnectionError):
            return None if _refused(exc) else backoff
        if isinstance(exc, openai.APIStatusError) and (exc.status_code == 429 or exc.status_code >= 500):
            return RETRIES.wait(attempt, retry_after(exc.response.headers))
        return None

    def _translate(self, exc: BaseException, attempts: int) -> AgentError:
        """The error a caller sees: what went wrong, where, and the provider's own words."""
        where = f"llm provider at {self.base_url}"
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        if isinstance(exc, openai.APITimeoutError):
            return AgentUnavailable(self.agent_id, f"{where} did not answer within {self.request_timeout:g}s")
        if isinstance(exc, openai.APIConnectionError | httpx.TransportError):
            reason = _connection_reason(exc)
            return AgentUnavailable(
                self.agent_id, f"llm provider unreachable at {self.base_url} ({reason}){tries}"
            )
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            if 300 <= status < 400:
                where_to = exc.response.headers.get("location", "?")
                return AgentUnavailable(
                    self.agent_id, f"{where} answered HTTP {status}; redirect to {where_to} not followed"
                )
            detail = self._scrub(_provider_message(exc))
            if status == 429 or status >= 500:
                return AgentUnavailable(self.agent_id, f"{where} answered HTTP {status}{tries}: {detail}")
            return AgentError(self.agent_id, f"{where} rejected the request (HTTP {status}): {detail}")
        return InvalidAgentReply(
            self.agent_id, f"{where} answered with something unexpected: {self._scrub(str(exc))}"
        )

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text


def _add_fragments(calls: dict[int, ToolCall], fragments: list[Any]) -> None:
    """Fold streamed tool-call fragments (id and name first, arguments in pieces) by index."""
    for fragment in fragments:
        call = calls.setdefault(fragment.index, ToolCall(id="", name="", arguments=""))
        call.id = call.id or fragment.id or f"call_{fragment.index}"
        if fragment.function is not None:
            call.name = call.name or fragment.function.name or ""
            call.arguments += fragment.function.arguments or ""


def _from_message(message: Any) -> Completion:
    if message is None:
        return Completion()
    calls = [
        ToolCall(
            id=call.id or f"call_{index}", name=call.function.name, arguments=call.function.arguments or ""
        )
        for index, call in enumerate(message.tool_calls or [])
        if getattr(call, "function", None) is not None
    ]
    return Completion(text=message.content or "", tool_calls=calls)


def _provider_message(exc: openai.APIStatusError) -> str:
    """The provider's own explanation, from the usual `{"error": {"message": ...}}` shape or the body."""
    body = exc.body
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    if isinstance(body, str) and body:
        return body[:500]
    try:
        return exc.response.text[:500] or exc.message
    except httpx.ResponseNotRead:
        return exc.message


def _refused(exc: BaseException) -> bool:
    """Whether the URL guard refused the connection (retrying cannot help)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, RefusedConnection):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _summary(exc: openai.OpenAIError) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    return _connection_reason(exc)


def _connection_reason(exc: BaseException) -> str:
    """A short cause for a failed connection: "connection refused", or the innermost error."""
    seen: BaseException | None = exc
    innermost = exc
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError) or "refused" in str(seen).lower():
            return "connection refused"
        innermost = seen
        seen = seen.__cause__ or seen.__context__
    return str(innermost) or type(innermost).__name__
