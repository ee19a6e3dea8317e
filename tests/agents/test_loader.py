"""`kind: python`: today's duck types and a `ranch.Agent` subclass, built from the config as served."""

from __future__ import annotations

import pytest
from a2a.types import Message

from _support import probes
from _support.sdk import user_message
from ranch import CLIENT_ROUTING_URI, Agent, Call, ConfigError, InvalidAgentReply, parse_config, text_of
from ranch.catalog.build import build_agent
from ranch.wire.client import ClientPool

pytestmark = pytest.mark.anyio


async def built(entry: str, extra: str = "") -> Agent:
    config = parse_config(f"agents:\n  - {{id: member, kind: python, entry: '{entry}'{extra}}}\n")
    async with ClientPool() as pool:
        return build_agent(config.agents[0], pool)


async def answer(agent: Agent, text: str) -> list[str]:
    replies = [event async for event in agent.run(user_message(text), Call())]
    assert all(isinstance(event, Message) for event in replies)
    return [text_of(event) for event in replies if isinstance(event, Message)]


async def test_a_duck_typed_class_gets_its_options_and_the_config_names_it() -> None:
    agent = await built("_support.probes:Probe", ", client_routing: true, options: {reply: 'got {text}'}")
    assert await answer(agent, "hi") == ["got hi"]
    info = await agent.info()
    assert (info.id, info.name, info.client_routing) == ("member", "member", True)
    assert [message.parts[0].text for message in probes.RECEIVED["member"]] == ["hi"]


async def test_an_async_generator_function_is_an_agent_and_its_strings_are_replies() -> None:
    agent = await built("_support.probes:shout")
    assert await answer(agent, "quiet") == ["QUIET"]


async def test_an_agent_subclass_is_built_with_its_options_and_keeps_its_own_card() -> None:
    agent = await built("_support.probes:TypedProbe", ", options: {prefix: loud}")
    assert await answer(agent, "hi") == ["loud: HI"]
    info = await agent.info()
    assert (info.id, info.name, info.description) == ("member", "Typed Probe", "its own words")
    assert [skill.id for skill in info.skills] == ["shout"]
    assert not info.client_routing


async def test_the_config_wins_over_an_agent_subclass_where_it_says_something() -> None:
    extra = (
        ", name: Loud, description: from the config, client_routing: true,"
        " skills: [{id: cfg, name: configured}]"
    )
    info = await (await built("_support.probes:TypedProbe", extra)).info()
    assert (info.id, info.name, info.description) == ("member", "Loud", "from the config")
    assert [skill.id for skill in info.skills] == ["cfg"]
    assert [ext.uri for ext in info.extensions] == [CLIENT_ROUTING_URI]


async def test_an_agent_subclass_is_opened_and_closed_with_the_server() -> None:
    agent = await built("_support.probes:TypedProbe")
    await agent.open()
    await agent.aclose()
    assert probes.LIFECYCLE == ["open member", "close member"]


async def test_an_agent_subclass_that_cannot_be_built_is_a_config_error_naming_the_agent() -> None:
    with pytest.raises(ConfigError, match="member: cannot create AbstractProbe"):
        await built("_support.probes:AbstractProbe")


async def test_an_entry_yielding_something_else_fails_naming_the_agent() -> None:
    agent = await built("_support.probes:numbers")
    with pytest.raises(InvalidAgentReply, match="agent 'member': yielded a int"):
        await answer(agent, "hi")
