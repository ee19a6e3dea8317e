"""In an organization's team, members may name each other by their short names.

An organization's agents have ids `<org>.<name>` (docs/api.md, "Ids"); a rules agent it registers
can route to `helper` rather than `acme.helper`, as a person mentions `@helper` in its rooms.
"""

from __future__ import annotations

import re

import pytest
from a2a.types import Message, Part, Role, Task

from ranch.agents.base import AgentInfo, Call
from ranch.agents.echo import EchoAgent
from ranch.agents.fold import fold
from ranch.agents.invoke import invoke
from ranch.agents.rules import Rule, RulesAgent
from ranch.routing.team import Team

pytestmark = pytest.mark.anyio


async def test_a_member_named_by_its_short_name_is_reached() -> None:
    triage = RulesAgent(AgentInfo(id="acme.triage", name="triage"), [Rule(re.compile("."), "over", "helper")])
    helper = EchoAgent(AgentInfo(id="acme.helper", name="helper"))
    desk = Team(
        id="acme.desk", members={"acme.triage": triage, "acme.helper": helper}, default_agent="acme.triage"
    )
    assert desk.member("helper") == "acme.helper" and desk.member("acme.helper") == "acme.helper"
    assert desk.member("stranger") is None
    message = Message(message_id="m1", role=Role.ROLE_USER, context_id="c1", parts=[Part(text="hi")])
    async with invoke(desk, message, Call(owner="acme.desk/")) as events:
        answer = await fold(events, desk.id)
    assert isinstance(answer.task, Task)
    hops = [artifact.name for artifact in answer.task.artifacts]
    assert hops[:2] == ["acme.triage", "acme.helper"]
