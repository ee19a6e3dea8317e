"""`kind: python`: an agent written in Python, named `module:attr` in the config.

`attr` may be:

- a class: instantiated with the config's `options` as keyword arguments (and
  `agent_id=<its id>` when the constructor takes that parameter);
- an object with `run(message, call)`;
- an async generator function `run(message, call)`.

`run` yields A2A events (`ranch.Event`) or plain strings, which become the agent's
reply. Identity, skills and whether it declares client routing come from the config.

A `ranch.Agent` subclass (or instance) is the typed way to write the same: its `info()`
describes it where the config does not (the config's id, name, description and skills win),
`client_routing: true` adds the declaration, and the server calls its `open` and `aclose`.
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
"""The duck type: `run(message, call)` yielding events or strings."""


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


def resolve_runner(agent_id: str, target: Any, options: dict[str, Any]) -> Runner | Agent:
    """Turn whatever `entry` named into a `run(message, call)` callable, or the `Agent` it built."""
    if inspect.isclass(target):
        kwargs = dict(options)
        if "agent_id" in inspect.signature(target).parameters:
            kwargs.setdefault("agent_id", agent_id)
        try:
            target = target(**kwargs)
        except TypeError as exc:
            raise ConfigError([f"{agent_id}: cannot create {target.__name__}(**options): {exc}"]) from exc
    if isinstance(target, Agent):
        return target
    run = getattr(target, "run", target)
    if not inspect.isasyncgenfunction(run):
        raise ConfigError([f"{agent_id}: entry must be an async generator `run(message, call)` or have one"])
    return run  # type: ignore[no-any-return]


class PythonAgent(Agent):
    """Adapts user code to the Agent interface, under the id and limits the config gives it."""

    def __init__(
        self, info: AgentInfo, run: Runner | Agent, *, modes_configured: tuple[bool, bool] = (False, False)
    ) -> None:
        self.id = info.id
        self._info = info
        self._modes_configured = modes_configured
        """Whether the config names its input modes, its output modes: those win over the `Agent`'s own."""
        self._agent = run if isinstance(run, Agent) else None
        """The user's own `Agent`, when the entry built one: it describes itself and holds resources."""
        self._run: Runner = run.run if isinstance(run, Agent) else run
        owner = getattr(run, "__self__", run)  # a bound `run`: its object says
        self.streams_text = bool(getattr(owner, "streams_text", False))

    async def info(self) -> AgentInfo:
        if self._agent is None:
            return self._info
        return _merged(self._info, await self._agent.info(), self._modes_configured)

    async def open(self) -> None:
        if self._agent is not None:
            await self._agent.open()

    async def aclose(self) -> None:
        if self._agent is not None:
            await self._agent.aclose()

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


def _merged(config: AgentInfo, own: AgentInfo, modes_configured: tuple[bool, bool]) -> AgentInfo:
    """An `Agent`'s own info under the config's id; what the config sets wins, the declaration adds."""
    extensions = list(own.extensions)
    extensions += [ext for ext in config.extensions if ext.uri not in {e.uri for e in extensions}]
    return AgentInfo(
        id=config.id,
        name=config.name if config.name != config.id else own.name,
        description=config.description or own.description,
        skills=config.skills or own.skills,
        extensions=extensions,
        streaming=own.streaming,
        input_modes=config.input_modes if modes_configured[0] else own.input_modes,
        output_modes=config.output_modes if modes_configured[1] else own.output_modes,
    )
