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

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager

import anyio
from a2a.types import Message
from anyio.streams.memory import MemoryObjectReceiveStream

from ranch.agents.base import Agent, Call, Event
from ranch.exceptions import AgentError, AgentTimeout, RanchError

logger = logging.getLogger(__name__)


@asynccontextmanager
async def invoke(
    agent: Agent, message: Message, call: Call, *, seconds: float | None = None
) -> AsyncIterator[AsyncIterator[Event]]:
    """The events of one call of `agent` within `seconds` (default: its `timeout`); see the module."""
    limit = agent.timeout if seconds is None else seconds
    try:
        with anyio.fail_after(limit):
            async with aclosing(_translated(agent.id, agent.run(message, call))) as events:
                yield events
    except TimeoutError as exc:
        raise AgentTimeout(agent.id, limit) from exc


STOP_WAIT_S = 5.0
"""How long a stopped agent call is waited for before the caller goes on without it."""


class MemberCall:
    """`invoke` in a task of its own, its events handed over a bounded stream: for a caller that
    yields between events (a team's Router streaming a hop). The agent runs inside `invoke`'s one
    timeout scope, nested as it would be when called directly; the caller holds no cancel scope
    across its own yields; `stop()` cancels the agent (a cancellation, which a remote agent passes
    on to its peer), and `ended()` raises what the call raised."""

    BUFFER = 64

    def __init__(self, agent: Agent, message: Message, call: Call) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[Event](self.BUFFER)
        self._error: BaseException | None = None
        self._task = asyncio.get_running_loop().create_task(self._drive(agent, message, call))
        self._task.add_done_callback(lambda _: self._send.close())  # also when cancelled before it ran

    async def _drive(self, agent: Agent, message: Message, call: Call) -> None:
        try:
            async with self._send, invoke(agent, message, call) as events:
                async for event in events:
                    await self._send.send(event)
        except (anyio.get_cancelled_exc_class(), anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # stopped: the caller has what it wanted, or is gone
        except Exception as exc:  # the call's own error (AgentTimeout, AgentError ...), for `ended`
            self._error = exc

    @property
    def events(self) -> MemoryObjectReceiveStream[Event]:
        """The agent's events as they come (the stream ends when the call does)."""
        return self._receive

    def stop(self) -> None:
        """Cancel the agent if it is still running (the answer is in, or the caller went away)."""
        if not self._task.done():
            self._task.cancel()
        self._receive.close()

    async def ended(self) -> None:
        """Wait for the call to finish (an agent slow to stop is waited for `STOP_WAIT_S` at most);
        raise its error, if it ended with one."""
        if not self._task.done():
            with anyio.move_on_after(STOP_WAIT_S, shield=True):
                await self._task
        self._receive.close()
        if self._error is not None:
            raise self._error


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
