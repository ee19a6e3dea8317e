"""ranch: teams of A2A agents, local or remote, that route work to each other.

The public surface is re-exported here; each concept lives in its own subpackage
(`routing`, `agents`, `wire`, `hub`, `cli`).
"""

from ranch._version import __version__
from ranch.agents.base import Agent, AgentInfo, Call
from ranch.exceptions import RanchError
from ranch.routing.team import Team

__all__ = ["Agent", "AgentInfo", "Call", "RanchError", "Team", "__version__"]
