"""A team is an agent: members, a default agent, and the Router's policies.

Its card is its own name and description, the union of its members' skills and
the client-routing extension; it is served like any agent, so teams nest.
Conversations (one per owner and contextId) hold the transcript, each member's own ids,
and who is waiting for input; a turn holds its conversation's lock, so two
messages in one context are answered in order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
from a2a.types import AgentSkill, Message
from google.protobuf.struct_pb2 import ListValue

from ranch.agents.base import Agent, AgentInfo, Call, Event, gather_infos
from ranch.identity.caller import DEFAULT_ORGANIZATION, Caller
from ranch.ids import new_id
from ranch.routing import context
from ranch.routing.durable import Checkpoint
from ranch.routing.router import Turn
from ranch.wire import client_routing, modes

if TYPE_CHECKING:
    from ranch.config import Approvers  # a type only: `import ranch` stays free of the config and YAML
    from ranch.db.conversations import ConversationStore

logger = logging.getLogger(__name__)

ROSTER_TTL = 30.0
"""Seconds the members' cards are reused before they are read again (remote cards may change)."""
PEER_LISTS = 256
"""Prebuilt peer lists kept per roster (one per target and handoff set)."""


@dataclass
class Roster:
    """The team's members as routing peers: their infos, and peer lists built once and reused."""

    infos: dict[str, AgentInfo]
    built: float
    _lists: dict[tuple[str, tuple[str, ...] | None], ListValue] = field(default_factory=dict)

    def routes(self, member: str) -> bool:
        """True when `member` declares client routing, so it gets the peers."""
        return self.infos[member].client_routing

    def peers(self, exclude: str, only: list[str] | None = None) -> ListValue:
        """Members other than `exclude`, narrowed to `only` (the previous agent's handoffs)."""
        key = (exclude, tuple(only) if only is not None else None)
        listed = self._lists.get(key)
        if listed is None:
            if len(self._lists) >= PEER_LISTS:
                self._lists.clear()
            cards = [
                info.peer_card()
                for member, info in self.infos.items()
                if member != exclude and (only is None or member in only)
            ]
            listed = self._lists[key] = client_routing.peer_list(cards)
        return listed


class Team(Agent):
    """Routes each user turn through its members (docs/routing.md)."""

    streams_text = True

    def __init__(
        self,
        *,
        id: str,
        members: Mapping[str, Agent],
        default_agent: str,
        name: str | None = None,
        description: str = "",
        max_hops: int = 10,
        on_invalid_recipient: Literal["fallback", "error"] = "fallback",
        on_loop: Literal["default", "user", "fail"] = "default",
        loop_repeats: int = 3,
        loop_cycles: int = 3,
        on_done: Literal["return", "escalate"] = "return",
        budget_tokens: int | None = None,
        access: Mapping[str, tuple[list[str] | None, list[str]]] | None = None,
        approval: tuple[str, ...] = (),
        approvers: Approvers | None = None,
        routes: Mapping[str, str] | None = None,
        history_length: int | None = None,
        timeout: float = 600.0,
        require_extensions: tuple[str, ...] = (),
        conversations: context.Conversations | None = None,
    ) -> None:
        if default_agent not in members:
            raise ValueError(f"team '{id}': default_agent '{default_agent}' is not a member")
        self.id = id
        self.name = name or id
        self.description = description
        self.members = dict(members)
        self.default_agent = default_agent
        self.max_hops = max_hops
        self.on_invalid_recipient = on_invalid_recipient
        self.on_loop = on_loop
        """What a loop (`ranch.routing.loops`) does: go to the default agent once with a note and then
        to the user (`default`), go to the user, or fail."""
        self.loop_repeats = loop_repeats
        """The same edge with the same text, or hops in a row with nothing new, that make a loop."""
        self.loop_cycles = loop_cycles
        """Rounds a cycle of two or three members may make; the edge starting one more is a loop."""
        self.on_done = on_done
        """What its members' `user` means to a team that calls it: `return` (its answer; the caller's
        static route for it still applies) or `escalate` (the caller's turn ends too)."""
        self.budget_tokens = budget_tokens
        # an organization's team may name its members by their short names (`finance`)
        self.access = {self.member(name) or name: rule for name, rule in (access or {}).items()}
        """Member -> (allow, deny): the callers it is open to (docs/routing.md, "The caller")."""
        self.approval = tuple(self.member(name) or name for name in approval)
        """Members a turn reaches only once a person approved the hop."""
        self.approvers = approvers
        """Who answers the approval question; None: the person who asked, or an owner or admin."""
        """Tokens a turn may spend (what its members report); once spent, no hop starts."""
        self.routes = dict(routes or {})
        self.history_length = history_length
        self.timeout = timeout
        self.require_extensions = require_extensions
        self.conversations = conversations or context.Conversations()
        """Its conversations by (owner, contextId), bounded in number and in bytes."""
        self._roster: Roster | None = None

    def open_to(self, member: str, caller: Caller | None) -> bool:
        """Whether `member` may be routed to in a turn for `caller` (an anonymous caller matches
        no rule: a member with an `allow` list is closed to it)."""
        rule = self.access.get(member)
        if rule is None:
            return True
        allow, deny = rule
        own_org = self._own_org()
        names = set() if caller is None else {
            f"org:{caller.organization}", f"{'user' if caller.kind == 'person' else 'agent'}:{caller.id}",
            f"kind:{caller.kind}",
            # a role counts in the team's own organization only: another tenant's admin is no admin here
            *([f"role:{caller.role}"] if caller.role and caller.organization == own_org else []),
        }  # fmt: skip
        if names & set(deny):
            return False
        return allow is None or bool(names & set(allow))

    def approver_rule(self, asker: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
        """The roles and user ids that may answer an approval question `asker` caused: the team's
        `approvers`, else an owner or admin and the person who asked."""
        if self.approvers is not None:
            return list(self.approvers.roles), [self._user_id(name) for name in self.approvers.users]
        asked_by = [str(asker["id"])] if asker is not None and asker.get("kind") == "person" else []
        return ["owner", "admin"], asked_by

    def approver(self, caller: Caller, asker: Mapping[str, Any] | None) -> bool:
        """Whether the person `caller` may answer an approval question `asker` caused. A role counts
        in the team's own organization, or in the room the answer is posted in."""
        roles, users = self.approver_rule(asker)  # user ids are unique across organizations
        held = {caller.room_role, caller.role if caller.organization == self._own_org() else None}
        return caller.id in users or bool(held & set(roles))

    def _own_org(self) -> str:
        return self.id.rpartition(".")[0] or DEFAULT_ORGANIZATION

    def _user_id(self, name: str) -> str:
        """A user an organization's team names by their short name (`ann` for `acme.ann`)."""
        org = self.id.rpartition(".")[0]
        return f"{org}.{name}" if org and "." not in name else name

    def member(self, name: str) -> str | None:
        """The member `name` names: its id, or in an organization's team (`acme.desk`) the short name
        of one of its own members (`helper` for `acme.helper`); None when it names none."""
        if name in self.members:
            return name
        org, dot, _ = self.id.rpartition(".")
        full = f"{org}.{name}" if dot else ""
        return full if full in self.members else None

    async def info(self) -> AgentInfo:
        """Its members' skills; it takes what its default agent takes (every turn starts there) and
        answers with what any member may answer with."""
        roster = await self.roster()
        infos = roster.infos.values()
        skills: dict[str, AgentSkill] = {}
        for info in infos:
            for skill in info.skills:
                skills.setdefault(skill.id, skill)
        first = roster.infos[self.default_agent]
        return AgentInfo(
            id=self.id,
            name=self.name,
            description=self.description,
            skills=list(skills.values()),
            extensions=[client_routing.declaration()],
            input_modes=list(first.input_modes),
            output_modes=modes.merged(*(info.output_modes for info in infos)),
        )

    async def roster(self) -> Roster:
        """The members as peers see them; built once, refreshed every ROSTER_TTL seconds."""
        roster = self._roster
        if roster is None or time.monotonic() - roster.built > ROSTER_TTL:
            infos = await self._member_infos(list(self.members))
            roster = self._roster = Roster(dict(zip(self.members, infos, strict=True)), time.monotonic())
        return roster

    def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        if not message.context_id:
            message.context_id = new_id()
        task_id = message.task_id or new_id()
        checkpoints = self.conversations.store if call.resumable and message.task_id else None
        turn = Turn(self, self.conversation(call.owner, message.context_id), message, task_id, call.owner,
                    call.caller, checkpoints)  # fmt: skip
        return self._turn(turn, call.owner)

    def resume_turn(self, checkpoint: Checkpoint, call: Call) -> AsyncGenerator[Event, None]:
        """The turn of a task a stopped replica was running, from where its checkpoint says."""
        message = checkpoint.message
        conversation = self.conversation(checkpoint.owner, message.context_id)
        turn = Turn(self, conversation, message, checkpoint.task_id, checkpoint.owner, checkpoint.caller,
                    self.conversations.store)  # fmt: skip
        return self._turn(turn, checkpoint.owner, checkpoint)

    async def _turn(
        self, turn: Turn, owner: str, resumed: Checkpoint | None = None
    ) -> AsyncGenerator[Event, None]:
        """Run `turn` holding its conversation's lock; the conversation is stored once it ends, and
        its checkpoint goes with it."""
        conversation, conversations = turn.conversation, self.conversations
        key = (self.id, owner, turn.context_id)
        async with conversation.lock:
            await conversations.refresh(*key, conversation)  # another replica may have had the last turn
            try:
                async for event in turn.run(resumed):
                    yield event
            finally:  # a turn that failed or was cancelled still leaves what it said
                with anyio.CancelScope(shield=True):
                    if turn.checkpoints is not None and turn.checkpointed and turn.ended:
                        turn.checkpoints.drop_checkpoint(turn.task_id)  # committed with the task's end
                    await self._persist(key, conversation)

    async def _persist(self, key: tuple[str, str, str], conversation: context.Conversation) -> None:
        try:
            await self.conversations.persist(*key, conversation)
        except Exception:  # the answer is given; the next turn here still has it in memory
            logger.warning("team %s: could not store conversation %s", self.id, key[2], exc_info=True)

    def conversation(self, owner: str, context_id: str) -> context.Conversation:
        """The state of one owner's contextId, created on first use: another owner's same
        contextId is another conversation."""
        return self.conversations.get(owner, context_id)

    async def aclose(self) -> None:
        self.conversations.clear()

    def keep_state(self, store: ConversationStore) -> None:
        self.conversations.store = store

    async def _member_infos(self, ids: list[str]) -> list[AgentInfo]:
        infos = await gather_infos([self.members[member] for member in ids])
        # a member's card may name it differently; the team knows it by its own id
        return [_with_id(info, member) for info, member in zip(infos, ids, strict=True)]


class ResumedTurn(Agent):
    """A team's turn taken over from a stopped replica, as the engine runs it: `Team.resume` from
    its checkpoint (`Team.resume_turn`), under the team's timeout."""

    streams_text = True

    def __init__(self, team: Team, checkpoint: Checkpoint) -> None:
        self.id = team.id
        self.timeout = team.timeout
        self.team = team
        self.checkpoint = checkpoint

    async def info(self) -> AgentInfo:
        return await self.team.info()

    def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        return self.team.resume_turn(self.checkpoint, call)


def _with_id(info: AgentInfo, member: str) -> AgentInfo:
    return info if info.id == member else replace(info, id=member)
