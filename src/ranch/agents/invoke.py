"""One agent call: the agent's events within its timeout, its failures as ranch errors.

Every place that calls an agent (the Router's hops, the task engine, `call_remote_agent`,
`/mcp`) goes through `invoke`, so a call has one timeout rule, one error rule and one way
to end: leaving the block closes the agent's event stream (which releases what it holds,
such as a team's conversation lock) and cancels what it still had running.

    async with invoke(agent, message, call) as events:
        async for event in events:
            ...

- The whole block runs under the agent's `timeout` (or the `seconds` given): past it, the block
  ends with `AgentTimeout` naming the agent.
- A ranch error from the agent passes through; any other exception it raises becomes an
  `AgentError` naming it (an agent's bug fails its call, never its caller). Errors raised
  by the block's own body are not the agent's and pass through unchanged.
- Cancellation (CancelTask, a caller going away) is never translated.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from contextvars import ContextVar

import anyio
from a2a.types import Message
from anyio.abc import TaskGroup

from ranch.agents.base import Agent, Call, Event
from ranch.exceptions import AgentError, AgentTimeout, RanchError

logger = logging.getLogger(__name__)

_MEMBER_CALLS: ContextVar[TaskGroup | None] = ContextVar("ranch_member_calls", default=None)
"""The task group of the innermost `invoke` of an agent that streams (a team among them): its
members' calls (`MemberCall`) run in it, so they end before that call does."""


@asynccontextmanager
async def invoke(
    agent: Agent, message: Message, call: Call, *, seconds: float | None = None
) -> AsyncIterator[AsyncIterator[Event]]:
    """The events of one call of `agent` within `seconds` (default: its `timeout`); see the module."""
    limit = agent.timeout if seconds is None else seconds
    try:
        with anyio.fail_after(limit):
            if not agent.streams_text:  # answers in place: it calls no member in a task of its own
                async with aclosing(_translated(agent.id, agent.run(message, call))) as events:
                    yield events
                return
            async with _member_calls(), aclosing(_translated(agent.id, agent.run(message, call))) as events:
                yield events
    except TimeoutError as exc:
        raise AgentTimeout(agent.id, limit) from exc


@asynccontextmanager
async def _member_calls() -> AsyncIterator[None]:
    """A task group for the members this call may start (`MemberCall`), current for the call. What
    the block raises leaves as it is, not in an exception group: the members' own errors never
    reach the group (`MemberCall` keeps them for `ended`)."""
    raised: BaseException | None = None
    async with anyio.create_task_group() as group:
        token = _MEMBER_CALLS.set(group)
        try:
            yield
        except BaseException as exc:  # the block's error or cancellation: the members are stopped
            raised = exc
            group.cancel_scope.cancel()
        finally:
            _MEMBER_CALLS.reset(token)
    if raised is not None:
        raise raised


STOP_WAIT_S = 5.0
"""How long `ended` waits for a stopped agent call before the caller goes on (the call's task group
still waits for it as the team's call ends)."""


class MemberCall:
    """`invoke` in a task of the team's call's task group, its events handed over a bounded stream:
    for a caller that yields between events (a team's Router streaming a hop), the pattern of
    Starlette's streaming (a task group and a memory stream). The agent runs inside `invoke`'s one
    timeout scope, nested as it would be when called directly; the caller holds no cancel scope
    across its own yields; `stop()` cancels the agent (a cancellation, which a remote agent passes
    on to its peer), and `ended()` raises what the call raised.

    A team run outside `invoke` (a script iterating `Team.run` itself) has no task group: its
    member is then called in place when its events are first read, and its answer handed over
    whole (its text is not passed on as it comes)."""

    BUFFER = 64

    def __init__(self, agent: Agent, message: Message, call: Call) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[Event](self.BUFFER)
        self._error: BaseException | None = None
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()
        self._whole: tuple[Agent, Message, Call] | None = None
        self._answer: list[Event] | None = None
        self.events = MemberEvents(self)
        """The agent's events as they come (they end when the call does)."""
        group = _MEMBER_CALLS.get()
        if group is not None:
            group.start_soon(self._drive, agent, message, call)
        else:
            self._whole = (agent, message, call)
            self._send.close()  # (unused: the answer comes whole)
            self._receive.close()
            self._done.set()

    async def _drive(self, agent: Agent, message: Message, call: Call) -> None:
        try:
            with self._scope:  # `stop` cancels it: the caller has what it wanted, or is gone
                async with self._send, invoke(agent, message, call) as events:
                    async for event in events:
                        await self._send.send(event)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the caller stopped reading
        except Exception as exc:  # the call's own error (AgentTimeout, AgentError ...), for `ended`
            self._error = exc
        finally:
            self._send.close()  # also when cancelled before it ran
            self._done.set()

    async def _next(self) -> Event:
        if self._whole is not None:
            agent, message, call = self._whole
            self._whole, self._answer = None, []
            try:
                async with invoke(agent, message, call) as events:
                    self._answer = [event async for event in events]
            except Exception as exc:
                self._error = exc
        if self._answer is None:
            return await self._receive.__anext__()
        if not self._answer:
            raise StopAsyncIteration
        return self._answer.pop(0)

    def stop(self) -> None:
        """Cancel the agent if it is still running (the answer is in, or the caller went away)."""
        self._scope.cancel()
        self.events.close()

    async def ended(self) -> None:
        """Wait for the call to finish (an agent slow to stop is waited for `STOP_WAIT_S` at most);
        raise its error, if it ended with one."""
        if not self._done.is_set():
            with anyio.move_on_after(STOP_WAIT_S, shield=True):
                await self._done.wait()
        self.events.close()
        if self._error is not None:
            raise self._error


class MemberEvents:
    """A `MemberCall`'s events, read with `async for`; `close()` when no more are wanted."""

    def __init__(self, member: MemberCall) -> None:
        self._member = member

    def __aiter__(self) -> MemberEvents:
        return self

    async def __anext__(self) -> Event:
        return await self._member._next()

    def close(self) -> None:
        self._member._receive.close()
        self._member._answer = None if self._member._answer is None else []


async def _translated(agent_id: str, events: AsyncGenerator[Event, None]) -> AsyncGenerator[Event, None]:
    """The agent's events; what it raises that is not a ranch error becomes an AgentError naming it."""
    async with aclosing(events) as stream:
        try:
            async for event in stream:
                yield event
        except (RanchError, TimeoutError):
            raise
        except Exception as exc:  # an agent's bug ends its call, not the server
            logger.exception("agent %s failed", agent_id)
            raise AgentError(agent_id, f"{type(exc).__name__}: {exc}") from exc
