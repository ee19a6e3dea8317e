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

import anyio
from a2a.types import Message

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


async def stepwise(
    agent: Agent, message: Message, call: Call, *, seconds: float | None = None
) -> AsyncGenerator[Event, None]:
    """`invoke`'s events for a caller that yields between them (a team's Router streaming a hop):
    the same timeout and error rules, with the deadline applied around each wait for the next
    event only, so no cancel scope stays open while the caller's own consumer runs."""
    limit = agent.timeout if seconds is None else seconds
    deadline = anyio.current_time() + limit
    async with aclosing(_translated(agent.id, agent.run(message, call))) as events:
        while True:
            try:
                with anyio.fail_after(max(0.0, deadline - anyio.current_time())):
                    event = await events.__anext__()
            except StopAsyncIteration:
                return
            except TimeoutError as exc:
                raise AgentTimeout(agent.id, limit) from exc
            yield event


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
