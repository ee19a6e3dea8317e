"""The one interface every agent kind implements, and small helpers for replies.

An agent turns one incoming A2A `Message` into a stream of A2A events: either a
single agent `Message` (a direct reply), or Task / status-update /
artifact-update events. Events are in the agent's own id space (a remote agent
reports its remote task and context ids); whoever serves or routes them maps ids.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import anyio
from a2a.types import (
    AgentExtension,
    AgentSkill,
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
)

from ranch.exceptions import UnsupportedContent
from ranch.identity.caller import Caller
from ranch.ids import new_id
from ranch.wire.client_routing import URI, RoutingDecision, SimplifiedAgentCard, attach_decision
from ranch.wire.events import ROLE_AGENT
from ranch.wire.modes import TEXT, first_refused

if TYPE_CHECKING:  # the database layer loads with the server, not with `import ranch`
    from ranch.db.conversations import ConversationStore

Event = Message | Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent
"""What an agent yields: the four A2A stream payloads."""
Resume = Literal["rerun", "skip", "fail"]
"""What a resumed turn does with a hop that was in flight when its replica stopped (`Agent.resume`)."""

CONTEXT_PART_KEY = "ranch.context"
"""Part metadata flag on the context part the Router prepends (see docs/routing.md)."""


@dataclass(frozen=True)
class Call:
    """How a message reaches an agent, beyond the message itself."""

    extensions: frozenset[str] = frozenset()
    """Extensions the caller asked for (the `A2A-Extensions` header)."""
    owner: str = ""
    """Whose conversation this is: the caller that owns the task (`agent/principal`), a room
    (`room:<id>`), or "" when nobody is named. A contextId is chosen by the client and is no
    secret, so every piece of per-conversation state is keyed by (owner, contextId): another
    owner sending the same contextId starts a separate conversation."""
    caller: Caller | None = None
    """The authenticated principal the turn is for (None: an anonymous caller of an open server)."""
    resumable: bool = False
    """The call is a task the engine drives (an A2A task's, a room execution's turn), which another
    replica resumes if this one stops mid-turn: a team writes a checkpoint as each hop starts
    (routing/durable.py). Not a member's hop inside a turn."""


@dataclass
class AgentInfo:
    """What an agent says about itself: the stuff cards and peer lists are made of."""

    id: str
    name: str
    description: str = ""
    skills: list[AgentSkill] = field(default_factory=list)
    extensions: list[AgentExtension] = field(default_factory=list)
    streaming: bool = True
    input_modes: list[str] = field(default_factory=lambda: [TEXT])
    """The media types it takes (its card's `defaultInputModes`); a part of another type is refused."""
    output_modes: list[str] = field(default_factory=lambda: [TEXT])
    """The media types its answers may hold (its card's `defaultOutputModes`)."""

    @property
    def client_routing(self) -> bool:
        return any(ext.uri == URI for ext in self.extensions)

    def peer_card(self) -> SimplifiedAgentCard:
        """This agent as a routing peer sees it."""
        return SimplifiedAgentCard(
            id=self.id,
            name=self.name,
            description=self.description,
            capabilities=[skill.name or skill.id for skill in self.skills],
            supports_client_routing=self.client_routing,
        )


class Agent(ABC):
    """Base of every agent kind: identity, per-hop limits, and `run`."""

    id: str
    history_length: int | None = None
    """How many unseen conversation entries a Router shows this agent (None = team default)."""
    timeout: float = 60.0
    """Seconds one call may take."""
    require_extensions: tuple[str, ...] = ()
    streams_text: bool = False
    """Its answers may come as text chunks while it works (a model, a remote agent, a team): a team's
    Router passes them on as they come (`agents.invoke.MemberCall`); others are called in place."""
    takes_text: bool = True
    """Its input modes take `text/plain` (nearly every agent's do); when not, a message's text parts
    are checked against them too, not only its files and data."""
    replies_directly: bool = False
    """True for kinds that always answer with exactly one Message at once (`reply_now`): they are
    served in the request itself, without a task."""
    resume: Resume = "skip"
    """What a team turn resumed on another replica does with this agent's hop in flight: `rerun` it
    (the kind is idempotent), `skip` it (the turn goes on to the default agent with a note), or
    `fail` the turn. Kinds without side effects rerun by default (docs/routing.md, "Durable turns")."""

    @abstractmethod
    async def info(self) -> AgentInfo:
        """Describe this agent (a remote agent fetches and caches its card)."""

    @abstractmethod
    def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        """Answer one message with A2A events."""

    def reply_now(self, message: Message, call: Call) -> Message:
        """The one Message a `replies_directly` kind answers with; `run` yields the same."""
        raise NotImplementedError(f"{type(self).__name__} does not reply directly")

    reattaches: bool = False
    """It runs a hop as a task of its own that a later call can read (`reattach`): a remote agent."""

    def reattach(self, task_id: str, context_id: str, call: Call) -> AsyncGenerator[Event, None]:
        """The events of its own task `task_id`, which an earlier call started for `context_id` (a
        stopped replica's): the task as it is, then what follows until it ends or waits. Only kinds
        that `reattaches`."""
        raise NotImplementedError(f"{type(self).__name__} cannot re-attach to a task")

    async def open(self) -> None:  # noqa: B027 - most kinds hold nothing; they need not override
        """Acquire what the agent holds (MCP connections) before serving; `aclose` releases it.

        Called once, in the task that will later call `aclose` (the app's lifespan).
        """

    async def aclose(self) -> None:  # noqa: B027 - most kinds hold nothing; they need not override
        """Release what the agent holds (connections, subprocesses)."""

    def keep_state(self, store: ConversationStore) -> None:  # noqa: B027 - most kinds keep none
        """Keep what the agent remembers of conversations in `store` (the hub's database), so a
        restart or another replica continues them; the hub calls it before serving."""


async def gather_infos(agents: Sequence[Agent]) -> list[AgentInfo]:
    """Every agent's `info()`, fetched at once (each remote card is bounded by its own timeout)."""
    infos: list[AgentInfo | None] = [None] * len(agents)

    async def fetch(index: int) -> None:
        infos[index] = await agents[index].info()

    async with anyio.create_task_group() as group:
        for index in range(len(agents)):
            group.start_soon(fetch, index)
    return [info for info in infos if info is not None]


async def check_input(agent: Agent, parts: Sequence[Part], field: str = "message.parts") -> None:
    """Refuse parts `agent`'s input modes do not take (UnsupportedContent names the part and its type)."""
    modes = (await agent.info()).input_modes
    refused = first_refused(parts, modes)
    if refused is not None:
        index, media_type = refused
        raise UnsupportedContent(agent.id, media_type, modes, f"{field}[{index}]")


def content_parts(message: Message) -> list[Part]:
    """The message's parts without the Router's context part: what the sender itself sent."""
    return [
        part
        for part in message.parts
        if not (part.HasField("metadata") and CONTEXT_PART_KEY in part.metadata.fields)
    ]


def text_of(message: Message, *, include_context: bool = False) -> str:
    """The message's text parts joined by newlines; the Router's context part is skipped."""
    parts = message.parts
    if len(parts) == 1:  # the commonest message: one part, read once (each protobuf read costs)
        only = parts[0]
        if only.WhichOneof("content") != "text":
            return ""
        if include_context or not only.HasField("metadata") or CONTEXT_PART_KEY not in only.metadata.fields:
            text: str = only.text
            return text
        return ""
    return "\n".join(
        part.text
        for part in message.parts
        if part.HasField("text")
        and (include_context or not part.HasField("metadata") or CONTEXT_PART_KEY not in part.metadata.fields)
    )


def reply(
    request: Message,
    text: str,
    decision: RoutingDecision | None = None,
) -> Message:
    """An agent Message answering `request`, optionally carrying a routing decision."""
    message = Message(
        message_id=new_id(),
        role=ROLE_AGENT,
        context_id=request.context_id,
        task_id=request.task_id,
        parts=[Part(text=text)],
    )
    if decision is not None:
        attach_decision(message, decision)
    return message
