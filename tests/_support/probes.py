"""Scripted `kind: python` agents for tests: they record what reaches them and answer as told.

Configure one in YAML:

    - id: worker
      kind: python
      entry: probes:Probe
      client_routing: true
      options: {reply: "done", route: user, reason: finished}

Options: `reply` (text; `{text}` is the incoming text), `route` (recipient string),
`form` (`uri` default, `x-recipient`, `object`: how the decision is written),
`reason`, `handoffs` (list), `sleep` (seconds before answering; with `sleep_on`, only
when the incoming text contains that word), `fail` (raise
RuntimeError with this text), `replies` (list of replies used in turn, the last
one repeating), `task` (answer with task events instead of a Message), `chunks`
(stream the reply as these artifact chunks, `chunk_pause` s apart, then complete the task), `done` (mark
the reply `ranch.done`: in a room, it ends the agent's execution).

Every message a probe receives is appended to `RECEIVED[agent_id]`, so tests
can check exactly what an agent was shown.

`TypedProbe` is the same idea written as a `ranch.Agent` subclass: it describes itself and
records its `open` / `aclose` in `LIFECYCLE`.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
from a2a.types import (
    AgentSkill,
    Artifact,
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict

from ranch import Agent, AgentInfo, Call, Event, reply, text_of
from ranch.wire import client_routing
from ranch.wire.keys import DONE

RECEIVED: defaultdict[str, list[Message]] = defaultdict(list)
CALLS: defaultdict[str, list[Call]] = defaultdict(list)
BUSY: defaultdict[str, int] = defaultdict(int)
"""Runs in progress, per agent id and per `agent id/context id`."""
PEAK: defaultdict[str, int] = defaultdict(int)
"""The most runs that were ever in progress at once, with the same keys as BUSY."""
LIFECYCLE: list[str] = []
"""`open <id>` and `close <id>`, in the order a TypedProbe was opened and closed."""
SLEEPER = """
agents:
  - id: sleeper
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 60, reply: "too late"}
"""
"""A config whose one agent, `sleeper`, answers after 60 s: a call to it stays open while a test acts."""


def reset() -> None:
    RECEIVED.clear()
    CALLS.clear()
    BUSY.clear()
    PEAK.clear()
    LIFECYCLE.clear()


def metadata_of(message: Message) -> dict[str, Any]:
    data: dict[str, Any] = MessageToDict(message.metadata)
    return data


class Probe:
    """One scripted agent; ranch passes its config id as `agent_id`."""

    def __init__(self, agent_id: str, **options: Any) -> None:
        self.name = agent_id
        self.options = options
        self.count = 0

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        copy = Message()
        copy.CopyFrom(message)
        RECEIVED[self.name].append(copy)
        CALLS[self.name].append(call)
        self.count += 1
        opts = self.options
        keys = (self.name, f"{self.name}/{message.context_id}")
        for key in keys:
            BUSY[key] += 1
            PEAK[key] = max(PEAK[key], BUSY[key])
        try:
            if opts.get("sleep") and opts.get("sleep_on", "") in text_of(message):
                await anyio.sleep(float(opts["sleep"]))
        finally:
            for key in keys:
                BUSY[key] -= 1
        if opts.get("fail"):
            raise RuntimeError(str(opts["fail"]))
        replies = opts.get("replies") or [opts.get("reply", f"{self.name} saw: {{text}}")]
        text = str(replies[min(self.count, len(replies)) - 1]).replace("{text}", text_of(message))
        answer = reply(message, text)
        _decide(answer, opts)
        if opts.get("done"):
            answer.metadata.update({DONE: True})
        if opts.get("chunks"):
            pause = float(opts.get("chunk_pause", 0.01))
            async for event in _streamed(message, [str(chunk) for chunk in opts["chunks"]], pause):
                yield event
            return
        if opts.get("task"):
            async for event in _as_task(message, answer):
                yield event
            return
        yield answer


def _decide(answer: Message, opts: dict[str, Any]) -> None:
    route = opts.get("route")
    if route is None:
        return
    form = opts.get("form", "uri")
    if form == "x-recipient":
        answer.metadata.update({client_routing.X_RECIPIENT: route})
        return
    recipient: Any = route
    if form == "object":
        recipient = {"type": route} if route in ("user", "sender") else {"type": "agent", "id": route}
    data: dict[str, Any] = {"recipient": recipient}
    if opts.get("reason"):
        data["reason"] = opts["reason"]
    if opts.get("handoffs") is not None:
        data["handoffs"] = opts["handoffs"]
    answer.metadata.update({client_routing.URI: data})


async def _as_task(message: Message, answer: Message) -> AsyncIterator[Event]:
    task_id = message.task_id or str(uuid.uuid4())
    yield Task(
        id=task_id, context_id=message.context_id, status=TaskStatus(state=TaskState.TASK_STATE_WORKING)
    )
    yield TaskArtifactUpdateEvent(
        task_id=task_id,
        context_id=message.context_id,
        artifact=Artifact(artifact_id="answer", parts=[Part(text=text_of(answer))], metadata=answer.metadata),
    )
    yield TaskStatusUpdateEvent(
        task_id=task_id,
        context_id=message.context_id,
        status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED),
    )


async def _streamed(message: Message, chunks: list[str], pause: float) -> AsyncIterator[Event]:
    """A reply streamed as one artifact, chunk by chunk, then the task completed with the whole text."""
    task_id = message.task_id or str(uuid.uuid4())
    yield Task(
        id=task_id, context_id=message.context_id, status=TaskStatus(state=TaskState.TASK_STATE_WORKING)
    )
    for index, chunk in enumerate(chunks):
        yield TaskArtifactUpdateEvent(
            task_id=task_id,
            context_id=message.context_id,
            artifact=Artifact(artifact_id="streamed", parts=[Part(text=chunk)]),
            append=index > 0,
            last_chunk=index == len(chunks) - 1,
        )
        await anyio.sleep(pause)
    whole = reply(message, "".join(chunks))
    yield TaskStatusUpdateEvent(
        task_id=task_id,
        context_id=message.context_id,
        status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=whole),
    )


class TypedProbe(Agent):
    """A `ranch.Agent` subclass as a user writes one: its own card, resources opened and closed."""

    def __init__(self, agent_id: str, prefix: str = "typed") -> None:
        self.id = agent_id
        self.prefix = prefix

    async def info(self) -> AgentInfo:
        skill = AgentSkill(id="shout", name="shout", description="Answers in capitals")
        return AgentInfo(id="its-own-id", name="Typed Probe", description="its own words", skills=[skill])

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        RECEIVED[self.id].append(message)
        yield reply(message, f"{self.prefix}: {text_of(message).upper()}")

    async def open(self) -> None:
        LIFECYCLE.append(f"open {self.id}")

    async def aclose(self) -> None:
        LIFECYCLE.append(f"close {self.id}")


class AbstractProbe(Agent):
    """An Agent subclass that forgot `info`: it cannot be built."""

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        yield reply(message, "never")


async def shout(message: Message, call: Call) -> AsyncIterator[Event | str]:
    """The smallest duck type: an async generator function that yields a string."""
    yield text_of(message).upper()


async def numbers(message: Message, call: Call) -> AsyncIterator[int]:
    """Not an agent's answer: what ranch refuses, naming the agent."""
    yield 42


class GroupedProbe:
    """Streams its answer while holding a task group open across its yields (a helper task runs
    beside it), as an agent built on structured concurrency does; `entry: probes:GroupedProbe`."""

    streams_text = True  # a team passes its chunks on as they come

    def __init__(self, agent_id: str = "grouped") -> None:
        self.name = agent_id

    async def run(self, message: Message, call: Call) -> AsyncIterator[Event]:
        artifact_id = uuid.uuid4().hex
        async with anyio.create_task_group() as group:
            group.start_soon(anyio.sleep, 0.01)
            for index, piece in enumerate(("held ", "open ", "throughout")):
                await anyio.sleep(0.005)
                yield TaskArtifactUpdateEvent(
                    task_id=message.task_id,
                    context_id=message.context_id,
                    artifact=Artifact(artifact_id=artifact_id, parts=[Part(text=piece)]),
                    append=index > 0,
                    last_chunk=False,
                )
        yield reply(message, "held open throughout")
