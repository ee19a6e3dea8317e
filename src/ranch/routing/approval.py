"""The caller's approval of a hop (docs/routing.md, "The caller"): a turn reaching one of the team's
`approval` members pauses with a question; a person answers it with their next message.

The question, and the turn it paused (the hop's parts and the trail so far), wait in the
conversation (`pending`), so the turn goes on from there whichever process takes the answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from a2a.types import Message, Part
from google.protobuf.json_format import MessageToDict, ParseDict

from ranch.agents.base import text_of
from ranch.identity.caller import Caller
from ranch.routing.context import Conversation
from ranch.routing.steps import Way
from ranch.routing.trail import Hop, Trail
from ranch.wire import client_routing

APPROVAL_TEXT = 2000
"""Characters of the text a member would receive that the approval question shows."""
APPROVE = frozenset({"approve", "approved", "yes", "ok", "y"})
DENY = frozenset({"deny", "denied", "no", "reject", "n"})


class ApprovalRules(Protocol):
    """What a team says of approvals and access (`routing.team.Team`)."""

    @property
    def default_agent(self) -> str: ...

    @property
    def approvers(self) -> object: ...

    @property
    def access(self) -> Mapping[str, object]: ...

    def approver_rule(self, asker: Mapping[str, Any] | None) -> tuple[list[str], list[str]]: ...

    def approver(self, caller: Caller, asker: Mapping[str, Any] | None) -> bool: ...

    def open_to(self, member: str, caller: Caller | None) -> bool: ...


def who(caller: Caller | None) -> str:
    """The caller, in words."""
    if caller is None:
        return "an anonymous caller"
    return f"{caller.kind} '{caller.id}' of '{caller.organization}'"


def approval_answer(message: Message) -> bool | None:
    """The caller's answer to an approval question: its first word (`approve`, `yes` / `deny`, `no`),
    or a data part `{"approve": true|false}`; None for anything else."""
    for part in message.parts:
        if part.HasField("data"):
            data = MessageToDict(part.data)
            if isinstance(data, dict) and isinstance(data.get("approve"), bool):
                return bool(data["approve"])
    words = text_of(message).strip().lower().split()
    first = words[0].strip(".,!") if words else ""
    return True if first in APPROVE else False if first in DENY else None


class Approval:
    """One turn's approval questions and answers, for `caller`, kept in `conversation`."""

    def __init__(self, team: ApprovalRules, caller: Caller | None, conversation: Conversation) -> None:
        self.team = team
        self.caller = caller
        self.conversation = conversation

    def ask(
        self, way: Way, asker: dict[str, str] | None, trail: Trail, refusal: str | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Pause the turn before `way`: the question, and what it says of the hop (`ranch.approval`).
        `asker` caused the question (by default they may answer it); `refusal` says why the message
        just received did not answer it."""
        text = text_of(Message(parts=way.parts))
        roles, users = self.team.approver_rule(asker)
        pending = {
            "member": way.target,
            "reason": way.reason,
            "sender": way.sender,
            "text": text[:APPROVAL_TEXT],
            "approvers": {"roles": roles, "users": users},
        }
        self.conversation.pending = {
            **pending,
            "asker": asker,
            "parts": [MessageToDict(part) for part in way.parts],
            "trail": trail.to_json(),  # the approved turn goes on from here
        }
        question = (
            f"Approve sending this to {way.target}? Why: {way.reason}. It would receive: "
            f"{text[:APPROVAL_TEXT]}\nAnswer 'approve' or 'deny'."
        )
        if refusal is not None:
            question = f"{refusal}\n{question}"
        return question, pending

    def waiting(self) -> tuple[Way, Trail, dict[str, str] | None] | None:
        """The hop a pending question paused, the trail before it and who asked; None when none waits."""
        pending = self.conversation.pending
        if pending is None:
            return None
        parts = [ParseDict(item, Part()) for item in pending.get("parts", [])]
        sender = str(pending.get("sender", client_routing.USER))
        way = Way(str(pending["member"]), str(pending.get("reason", "")), sender, parts)
        return way, Trail(Hop(**hop) for hop in pending.get("trail", [])), pending.get("asker")

    def answered(self, way: Way, approved: bool) -> Way:
        """Where the turn goes once the caller answered: the member, or the default agent with a note."""
        self.conversation.pending = None
        if approved:
            return Way(way.target, f"approved by {who(self.caller)}", way.sender, way.parts)
        note = Part(text=f"[ranch] {who(self.caller)} did not approve sending this to {way.target}.")
        reason = f"{way.target} denied by {who(self.caller)}"
        return Way(self.team.default_agent, reason, way.sender, [*way.parts, note])

    def refused(self, member: str, asker: dict[str, str] | None) -> str | None:
        """Why the caller may not answer the approval of the hop to `member`, None when they may: only
        a person (never an agent, nor an agent's message) to whom `member` is open, and one of the
        team's approvers. An open server's anonymous caller answers its own anonymous question."""
        caller, open_to = self.caller, self.team.open_to(member, self.caller)
        if caller is None and asker is None:
            why = None if open_to else f"{member} is not open to them"
        elif caller is None or caller.kind != "person":
            why = "only a person may approve"
        elif not open_to:
            why = f"{member} is not open to them"
        elif not self.team.approver(caller, asker):
            why = "they are not one of its approvers"
        else:
            why = None
        if why is None:
            return None
        waits = self.approvers(member, asker)
        return f"[ranch] {who(caller)} may not answer this question: {why}. It waits for {waits}."

    def approvers(self, member: str, asker: dict[str, str] | None) -> str:
        """Who may answer the approval of the hop to `member`, in words."""
        roles, users = self.team.approver_rule(asker)
        label = "the person who asked" if self.team.approvers is None else "user"
        named = [f"{label} '{user}'" for user in users]
        if roles:
            named.append(f"a person with the role {' or '.join(roles)}")
        someone = " or ".join(named) or "nobody (the team names no approvers)"
        return f"{someone}, to whom {member} is open" if member in self.team.access else someone
