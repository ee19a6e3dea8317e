"""`kind: python`: an agent written in Python, named `module:attr` in the config.

`attr` may be:

- a class: instantiated with the config's `options` as keyword arguments (and
  `agent_id=<its id>` when the constructor takes that parameter);
- an object with `run(message, call)`;
- an async generator function `run(message, call)`.

`run` yields A2A events (see `ranch.agents.base.Event`) or plain strings, which
become the agent's reply. Identity, skills and whether it declares client
routing come from the config.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import Any

from a2a.types import Message

from ranch.agents.base import Agent, AgentInfo, Call, Event, reply
from ranch.exceptions import ConfigError, InvalidAgentReply

Runner = Callable[[Message, Call], AsyncGenerator[Any, None]]


def import_entry(agent_id: str, entry: str) -> Any:
    """Import `module:attr`; a failure is a ConfigError naming the agent."""
    module_name, _, attr_path = entry.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for name in attr_path.split("."):
            target = getattr(target, name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError([f"{agent_id}: cannot import entry '{entry}': {exc}"]) from exc
    return target


def resolve_runner(agent_id: str, target: Any, options: dict[str, Any]) -> Runner:
    """Turn whatever `entry` named into a `run(message, call)` callable."""
    if inspect.isclass(target):
        kwargs = dict(options)
        if "agent_id" in inspect.signature(target).parameters:
            kwargs.setdefault("agent_id", agent_id)
        try:
            target = target(**kwargs)
        except TypeError as exc:
            raise ConfigError([f"{agent_id}: cannot create {target.__name__}(**options): {exc}"]) from exc
    run = getattr(target, "run", target)
    if not inspect.isasyncgenfunction(run):
        raise ConfigError([f"{agent_id}: entry must be an async generator `run(message, call)` or have one"])
    return run  # type: ignore[no-any-return]


class PythonAgent(Agent):
    """Adapts user code to the Agent interface."""

    def __init__(self, info: AgentInfo, run: Runner) -> None:
        self.id = info.id
        self._info = info
        self._run = run

    async def info(self) -> AgentInfo:
        return self._info

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        async with aclosing(self._run(message, call)) as items:
            async for item in items:
                if isinstance(item, str):
                    yield reply(message, item)
                elif isinstance(item, Event):
                    yield item
                else:
                    raise InvalidAgentReply(
                        self.id, f"yielded a {type(item).__name__}; expected an A2A event or str"
                    )
