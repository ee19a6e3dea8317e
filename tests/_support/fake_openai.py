"""A scripted OpenAI-compatible chat server for tests: the real wire format, on 127.0.0.1.

`POST /v1/chat/completions` answers from a queue of scripted replies per model
(`FakeOpenAI.script(model, *replies)`): text, tool calls (both streamed as
chunks when the request asks for `stream`), or an HTTP error (429 with
Retry-After, 500). Every request is recorded, so a test can check what the
model was shown: the messages, the tools, the `route_to` enum.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from _support.servers import ServerThread


@dataclass
class Reply:
    """One scripted answer."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(default_factory=list)
    """(name, arguments) pairs; arguments as a dict, or raw text (to send invalid JSON)."""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error: str = ""
    delay: float = 0.0
    """Seconds to wait between streamed chunks."""


def text(content: str, delay: float = 0.0) -> Reply:
    return Reply(text=content, delay=delay)


def tool(name: str, arguments: dict[str, Any] | str, content: str = "") -> Reply:
    return Reply(text=content, tool_calls=[(name, arguments)])


def tools(*calls: tuple[str, dict[str, Any] | str], content: str = "") -> Reply:
    return Reply(text=content, tool_calls=list(calls))


def error(status: int, message: str = "", retry_after: float | None = None) -> Reply:
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    return Reply(status=status, error=message or f"scripted HTTP {status}", headers=headers)


class FakeOpenAI:
    """The app and its state: scripts per model, recorded requests."""

    def __init__(self) -> None:
        self.scripts: defaultdict[str, deque[Reply]] = defaultdict(deque)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.arrivals: list[float] = []
        """`time.monotonic()` as each request arrived: how long a client waited between tries."""
        self.app = Starlette(routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])])

    def script(self, model: str, *replies: Reply) -> None:
        self.scripts[model].extend(replies)

    def reset(self) -> None:
        self.scripts.clear()
        self.requests.clear()
        self.headers.clear()
        self.arrivals.clear()

    def requests_for(self, model: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r.get("model") == model]

    async def _complete(self, request: Request) -> Response:
        self.arrivals.append(time.monotonic())
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        model = str(body.get("model"))
        if not self.scripts[model]:
            return JSONResponse({"error": {"message": f"no scripted reply left for model {model}"}}, 500)
        reply = self.scripts[model].popleft()
        if reply.status != 200:
            body_ = {"error": {"message": reply.error, "type": "scripted", "code": reply.status}}
            return JSONResponse(body_, reply.status, headers=reply.headers)
        usage = _usage(body, reply)
        if body.get("stream"):
            with_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            chunks = _chunks(model, reply, usage if with_usage else None)
            return StreamingResponse(chunks, media_type="text/event-stream")
        return JSONResponse(_completion(model, reply, usage))


def _calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {
            "id": f"call_{index}_{name}",
            "type": "function",
            "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
        }
        for index, (name, args) in enumerate(reply.tool_calls)
    ]


def _usage(body: dict[str, Any], reply: Reply) -> dict[str, int]:
    """Tokens as a provider counts them, made predictable: a word of the prompt or the answer is a
    token, each tool call one more."""
    prompt = sum(
        len(str(message.get("content") or "").split())
        for message in body.get("messages", [])
        if isinstance(message, dict)
    )
    answer = len(reply.text.split()) + len(reply.tool_calls)
    return {"prompt_tokens": prompt, "completion_tokens": answer, "total_tokens": prompt + answer}


def _completion(model: str, reply: Reply, usage: dict[str, int]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = _calls(reply)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if reply.tool_calls else "stop"}
        ],
        "usage": usage,
    }


async def _chunks(model: str, reply: Reply, usage: dict[str, int] | None) -> AsyncIterator[bytes]:
    """The answer as OpenAI streams it: a role chunk, content word by word, tool calls in fragments,
    and (when the request's `stream_options.include_usage` asked) a last chunk with no choices and
    the `usage`."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return f"data: {json.dumps(data)}\n\n".encode()

    yield chunk({"role": "assistant", "content": ""})
    words = reply.text.split(" ")
    for index, word in enumerate(words if reply.text else []):
        if reply.delay:
            await anyio.sleep(reply.delay)
        yield chunk({"content": word if index == 0 else " " + word})
    for index, call in enumerate(_calls(reply)):
        arguments = call["function"]["arguments"]
        name = call["function"]["name"]
        head = {
            "index": index,
            "id": call["id"],
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        yield chunk({"tool_calls": [head]})
        middle = len(arguments) // 2
        for piece in (arguments[:middle], arguments[middle:]):
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    yield chunk({}, "tool_calls" if reply.tool_calls else "stop")
    if usage is not None:
        last = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model, "choices": [], "usage": usage}  # fmt: skip
        yield f"data: {json.dumps(last)}\n\n".encode()
    yield b"data: [DONE]\n\n"


@contextlib.contextmanager
def serve_fake_openai() -> Iterator[tuple[FakeOpenAI, str]]:
    """The fake provider on 127.0.0.1; yields it and its base URL (ending in /v1)."""
    fake = FakeOpenAI()
    with ServerThread(fake.app, name="fake-openai") as server:
        yield fake, f"{server.url}/v1"


def tool_names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def route_enum(request: dict[str, Any]) -> list[str]:
    for spec in request.get("tools", []):
        if spec["function"]["name"] == "route_to":
            return list(spec["function"]["parameters"]["properties"]["recipient"]["enum"])
    return []


@pytest.fixture(scope="module")
def provider() -> Iterator[tuple[FakeOpenAI, str]]:
    """One scripted server per test module: (the fake, its base URL)."""
    with serve_fake_openai() as served:
        yield served


@pytest.fixture
def fake(provider: tuple[FakeOpenAI, str]) -> FakeOpenAI:
    """The module's fake, with an empty script and no recorded requests."""
    provider[0].reset()
    return provider[0]


@pytest.fixture
def base_url(provider: tuple[FakeOpenAI, str]) -> str:
    return provider[1]
