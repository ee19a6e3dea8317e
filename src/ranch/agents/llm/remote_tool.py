"""`call_remote_agent(agent, message)`: an llm agent asks an A2A agent, on an allow-list only.

`agent` is a URL or the name of one of the configured entries. Only URLs in
`allowed` are called (the hub may narrow that set); anything else, and every
failure of the call, comes back to the model as an error result. Calls go
through `RemoteAgent`, so they share the process's `ClientPool` and each
caller context keeps the remote agent's own context and waiting task.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from a2a.types import Message, Part, Role

from ranch.agents.base import AgentInfo, Call
from ranch.agents.fold import collect
from ranch.agents.llm.mcp import ToolResult
from ranch.agents.remote import RemoteAgent
from ranch.exceptions import AgentError
from ranch.ids import new_id
from ranch.wire.client import ClientPool

NAME = "call_remote_agent"


@dataclass(frozen=True)
class RemoteTarget:
    url: str
    name: str = ""
    description: str = ""
    headers: dict[str, str] = field(default_factory=dict)


class RemoteAgentTool:
    """The tool, its allow-list, and one `RemoteAgent` per allowed URL."""

    def __init__(
        self, owner: str, targets: list[RemoteTarget], pool: ClientPool, timeout: float = 60.0
    ) -> None:
        self.owner = owner
        self.targets = {target.url.rstrip("/"): target for target in targets}
        self.allowed: frozenset[str] = frozenset(self.targets)
        """URLs that may be called; narrow it, never widen it past `targets`."""
        self._pool = pool
        self._timeout = timeout
        self._agents: dict[str, RemoteAgent] = {}

    def spec(self) -> dict[str, object]:
        listed = "; ".join(
            f"{t.name + ' = ' if t.name else ''}{url}{': ' + t.description if t.description else ''}"
            for url, t in self.targets.items()
            if url in self.allowed
        )
        return {
            "type": "function",
            "function": {
                "name": NAME,
                "description": f"Send a message to another A2A agent and get its reply. Agents: {listed}",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "agent": {"type": "string", "description": "the agent's name or URL"},
                        "message": {"type": "string", "description": "what to ask it"},
                    },
                    "required": ["agent", "message"],
                    "additionalProperties": False,
                },
            },
        }

    def resolve(self, agent: str) -> str | None:
        """The URL `agent` stands for, if it is allowed."""
        by_name = {t.name: url for url, t in self.targets.items() if t.name}
        url = by_name.get(agent, agent.rstrip("/"))
        return url if url in self.allowed else None

    async def call(self, agent: str, text: str, context_id: str, owner: str = "") -> ToolResult:
        url = self.resolve(agent)
        if url is None:
            return ToolResult(
                f"agent '{agent}' is not on this agent's allow-list of remote agents", is_error=True
            )
        remote = self._agents.get(url)
        if remote is None:
            target = self.targets[url]
            info = AgentInfo(id=target.name or url, name=target.name or url)
            remote = self._agents[url] = RemoteAgent(info, url, self._pool, target.headers)
            remote.timeout = self._timeout
        message = Message(
            message_id=new_id(), role=Role.ROLE_USER, context_id=context_id, parts=[Part(text=text)]
        )
        try:
            outcome = await collect(remote, message, Call(owner=owner), seconds=self._timeout)
        except AgentError as exc:
            return ToolResult(str(exc), is_error=True)
        note = (
            "\n(the agent asks for more input; call it again with your answer)" if outcome.interrupted else ""
        )
        return ToolResult(outcome.text + note)
