"""The public API's types as a user's type checker sees them: read by mypy (`make typecheck`), never run.

Every name comes from `ranch` itself, so a re-export that loses its type (a lazy name typed
`Any`, an alias that stops being a union) fails the type check here.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import assert_type

from a2a.types import Message
from starlette.applications import Starlette

import ranch


class Shout(ranch.Agent):
    """A user's agent written against the public surface only."""

    async def info(self) -> ranch.AgentInfo:
        return ranch.AgentInfo(id="shout", name="Shout")

    async def run(self, message: Message, call: ranch.Call) -> AsyncGenerator[ranch.Event, None]:
        request = ranch.read_routing_request(message)
        decision = ranch.RoutingDecision(recipient=request.sender if request else ranch.CLIENT_ROUTING_URI)
        yield ranch.reply(message, ranch.text_of(message).upper(), decision)


async def checks(message: Message) -> None:
    assert_type(ranch.__version__, str)
    assert_type(ranch.CLIENT_ROUTING_URI, str)
    assert_type(ranch.text_of(message), str)
    assert_type(ranch.reply(message, "hi"), Message)
    assert_type(ranch.read_routing_request(message), ranch.RoutingRequest | None)
    card = ranch.SimplifiedAgentCard(id="a", name="A")
    assert_type(
        ranch.RoutingRequest(agent_cards=[card], sender="user").agent_cards, list[ranch.SimplifiedAgentCard]
    )
    assert_type(ranch.RoutingDecision(recipient="user").handoffs, list[str] | None)

    config = ranch.parse_config("agents: [{id: a, kind: echo}]")
    assert_type(config, ranch.RanchConfig)
    assert_type(ranch.load_config("ranch.yaml"), ranch.RanchConfig)
    assert_type(config.teams, list[ranch.TeamConfig])
    settings = ranch.Settings(database_url="sqlite+aiosqlite:///ranch.db")
    assert_type(settings, ranch.Settings)
    assert_type(ranch.create_app(config, settings), Starlette)

    shout = Shout()
    team = ranch.Team(id="team", members={"shout": shout}, default_agent="shout", max_hops=3)
    assert_type(await team.info(), ranch.AgentInfo)
    assert_type(team.run(message, ranch.Call(owner="me")), AsyncGenerator[ranch.Event, None])
    assert_type((await shout.info()).peer_card(), ranch.SimplifiedAgentCard)

    assert_type(ranch.HopLimitExceeded("team", 3, ["a", "b"]).trail, list[str])
    assert_type(ranch.AgentTimeout("a", 1.0).agent, str)
    assert_type(ranch.RateLimited("caller", 0.5).retry_after, float)
    assert_type(ranch.ConfigError(["a: bad"]).problems, list[str])
    error: ranch.RanchError = ranch.InvalidRecipient("a", "b", "team")
    assert isinstance(error, ranch.RoutingError)
