"""The cards a hub serves for its agents and teams (wire/cards.py builds them)."""

from __future__ import annotations

from a2a.types import AgentCard

from ranch._version import __version__
from ranch.agents.base import Agent
from ranch.wire.cards import build_card


async def served_card(agent: Agent, base_url: str, url: str | None = None) -> AgentCard:
    """The card this server serves for `agent` at /a2a/agents/{id} (or at `url`, for `--root`).

    Agents that answer at once with one Message (`replies_directly`) never create a task,
    so their cards do not offer push notifications.
    """
    info = await agent.info()
    return build_card(
        agent_id=agent.id,
        name=info.name,
        description=info.description,
        skills=info.skills,
        extensions=info.extensions,
        base_url=base_url,
        version=__version__,
        required=agent.require_extensions,
        streaming=True,
        push_notifications=not agent.replies_directly,
        url=url,
        input_modes=info.input_modes,
        output_modes=info.output_modes,
    )
