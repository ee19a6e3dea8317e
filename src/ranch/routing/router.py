"""The Router: one user turn through a team, hop by hop (docs/routing.md, section 2).

`Turn.run` is the whole algorithm on one screen; the phases it calls (pick the
first recipient, build the hop's message, send it, resolve the next recipient)
are the methods below it. A turn yields the team task's A2A events: a WORKING
status naming each agent and why it was chosen, an artifact with each reply,
and one final status (COMPLETED, INPUT_REQUIRED or FAILED) whose metadata holds
the trail.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp
from opentelemetry.trace import Span

from ranch.agents.base import Call, Event, text_of
from ranch.agents.fold import HopOutcome, TaskFold, collect
from ranch.agents.invoke import MemberCall
from ranch.exceptions import (
    AgentError,
    BudgetExceeded,
    Forbidden,
    HopLimitExceeded,
    InvalidRecipient,
    RanchError,
    RoutingError,
    RoutingLoop,
)
from ranch.identity.caller import Caller
from ranch.ids import new_id
from ranch.observe import metrics, tracing
from ranch.routing import context
from ranch.routing.loops import LoopGuard
from ranch.routing.trail import Hop, describe
from ranch.wire import client_routing, keys, modes
from ranch.wire.events import COMPLETED, FAILED, INPUT_REQUIRED, ROLE_AGENT, ROLE_USER, WORKING

if TYPE_CHECKING:
    from ranch.routing.team import Team

APPROVAL_TEXT = 2000
"""Characters of the text a member would receive that the approval question shows."""
APPROVE = frozenset({"approve", "approved", "yes", "ok", "y"})
DENY = frozenset({"deny", "denied", "no", "reject", "n"})
HOP_KEY = "ranch.hop"
"""Metadata key on per-hop status messages and artifacts: {agent, sender, reason, hop}."""


@dataclass
class Next:
    """Where the turn goes after a hop."""

    recipient: str
    reason: str
    note: str | None = None
    fallback: bool = False
    """The member's decision was not followed (none, or an invalid one): the Router chose."""
    loop: bool = False
    """The hop repeated an edge with nothing new: `on_loop` chose this."""
    static: bool = False
    """The member decided nothing (or its team returned) and the team's static route chose this."""


class Turn:
    """One user message travelling through a team until someone answers the user."""

    def __init__(
        self,
        team: Team,
        conversation: context.Conversation,
        message: Message,
        task_id: str,
        owner: str = "",
        caller: Caller | None = None,
    ) -> None:
        self.team = team
        self.owner = owner
        self.caller = caller
        """Who the turn is for: shown to routing members, read by the team's access and approval rules."""
        """Whose conversation this is; passed on to every member, so nested teams and remote
        members keep their state per owner too."""
        self.conversation = conversation
        self.message = message
        self.task_id = task_id
        self.context_id = message.context_id
        self.trail: list[Hop] = []
        self.handoffs: list[str] | None = None
        self.incoming = client_routing.read_request(message)
        """The routing data of a caller that is itself a team's Router (this team is its member)."""
        remaining = self.incoming.hops_remaining if self.incoming is not None else None
        self.inherited = remaining is not None and remaining < team.max_hops
        self.budget = min(team.max_hops, remaining) if remaining is not None else team.max_hops
        """Hops this turn may make: the team's own, or fewer when its caller had fewer left (the hop
        that called it counts as the hops made inside it), so teams of teams keep the outer budget."""
        self.outward: client_routing.RoutingDecision | None = None
        """The decision the turn ends with, for a caller that routes (docs/routing.md, "Teams of teams")."""
        self.guard = LoopGuard(
            team.loop_repeats,
            team.loop_cycles,
            self.incoming.seen if self.incoming is not None else None,
            self.incoming.trail if self.incoming is not None else None,
        )
        """Edges, what was reached and said: the loop guard (shared with member teams as `seen`)."""
        self.loops = 0
        self.pipeline = False
        """The hop in flight came down a chain of static routes that began at the default agent."""
        self.approved: str | None = None
        """The member the caller just approved: its next hop does not ask again."""
        self.span: Span | None = None
        """The turn's span while tracing is on; each hop's span is its child."""
        self.hop_span: Span | None = None

    async def run(self) -> AsyncIterator[Event]:
        """The algorithm: hop until a recipient is the user, an agent asks, or something fails."""
        self.conversation.add(client_routing.USER, text_of(self.message))
        began = time.perf_counter()
        if tracing.tracer() is not None:  # off: not even the attributes are made
            self.span = tracing.start(f"ranch.turn {self.team.id}", self.turn_attributes())
        state = FAILED
        try:
            start = self.start()
            if isinstance(start, TaskStatusUpdateEvent):  # not an answer to its question: asked again
                state = INPUT_REQUIRED
                yield start
                return
            target, reason, sender, parts = start
            while True:
                self.check_hop_budget(target)
                if target in self.team.approval and target != self.approved:
                    state = INPUT_REQUIRED
                    asker = self.caller.to_json() if self.caller is not None else None
                    yield self.ask_approval(target, reason, sender, parts, asker)
                    return
                self.approved = None
                yield self.working(target, sender, reason)
                started = time.perf_counter()
                outcome: HopOutcome | None = None
                async for item in self.traced_hop(target, sender, reason, parts):
                    if isinstance(item, HopOutcome):
                        outcome = item
                    else:
                        yield item  # the member's text as it comes, a chunk of its hop's artifact
                assert outcome is not None  # a hop ends with its outcome, or raises
                ms = round((time.perf_counter() - started) * 1000, 3)
                self.conversation.add(target, outcome.text)
                self.conversation.mark_seen(target)  # its own reply is not news to it
                step, invalid = self.decide(target, sender, outcome)
                if invalid is None and not outcome.interrupted:
                    step, invalid = self.guard_loop(target, step, outcome)
                # a chain of static routes from the default agent is a pipeline (docs/routing.md, 2.4)
                self.pipeline = step.static and (self.pipeline or target == self.team.default_agent)
                hop = self.record(target, sender, step, ms, outcome)
                self.observe_hop(hop, step, invalid)
                yield self.reply_artifact(outcome, hop)  # the hop's record travels with its reply
                if invalid is not None:
                    raise invalid
                if outcome.interrupted:
                    state = outcome.state
                    yield self.paused(outcome)
                    return
                parts = outcome.parts + ([Part(text=step.note)] if step.note else [])
                if step.recipient == client_routing.USER:
                    state = COMPLETED
                    yield self.final(COMPLETED, parts)
                    return
                sender, target, reason = target, step.recipient, step.reason
        except RanchError as exc:
            metrics.error(type(exc).__name__)
            tracing.failed(self.span, exc)
            yield self.final(FAILED, [Part(text=str(exc))], error=exc)
        except GeneratorExit:  # its reader stopped after the final event (or gave up): not a failure
            raise
        except BaseException as exc:  # cancelled, or ranch's own bug: the span says so too
            tracing.failed(self.span, exc)
            raise
        finally:
            self.observe_turn(began, state)

    # -- phases -------------------------------------------------------------------------------

    def start(self) -> tuple[str, str, str, list[Part]] | TaskStatusUpdateEvent:
        """Where the turn begins: the answer to a pending approval, else its first recipient with
        the caller's message; or the approval question again, when the message does not answer it."""
        resumed = self.resume_approval()
        if resumed is not None:
            return resumed
        target, reason = self.first_recipient()
        return target, reason, client_routing.USER, list(self.message.parts)

    def paused(self, outcome: HopOutcome) -> TaskStatusUpdateEvent:
        """The turn waits with its member: for an answer to the member's question, or (a member team)
        for the caller's approval, which it asks on the team's behalf."""
        event = self.final(outcome.state, outcome.parts)
        if outcome.approval is not None:
            event.status.message.metadata.update({keys.APPROVAL: outcome.approval})
        return event

    def first_recipient(self) -> tuple[str, str]:
        """A member waiting for input, else the message's own recipient, else the default agent
        (each only when open to the caller)."""
        waiting = self.conversation.waiting_on
        if waiting is not None and waiting in self.team.members and self.open_to(waiting):
            return waiting, "answering its question"
        asked = client_routing.read_decision(self.message)
        named = self.team.member(asked.recipient) if asked is not None else None
        if asked is not None and named is not None and self.open_to(named):
            return named, asked.reason or "named by the caller"
        if not self.open_to(self.team.default_agent):
            raise Forbidden(f"team '{self.team.id}' is not open to {self.who()}", "caller")
        return self.team.default_agent, "default agent"

    # -- the caller's policy: access and approval (docs/routing.md, "The caller") ----------------

    def open_to(self, member: str) -> bool:
        return self.team.open_to(member, self.caller)

    def closed(self, member: str, target: str) -> Next:
        """Where a turn goes instead of `member`, which is closed to the caller: the default agent
        with a note (from the default agent itself: the user)."""
        default, why = self.team.default_agent, f"{member} is closed to the caller"
        if target == default:
            note = f"[ranch] {member} is not open to {self.who()}; the turn ended."
            return Next(client_routing.USER, why, note, fallback=True)
        note = f"[ranch] {member} is not open to {self.who()}; the turn went to '{default}'."
        return Next(default, why, note, fallback=True)

    def who(self) -> str:
        caller = self.caller
        return (
            "an anonymous caller"
            if caller is None
            else f"{caller.kind} '{caller.id}' of '{caller.organization}'"
        )

    def ask_approval(
        self,
        member: str,
        reason: str,
        sender: str,
        parts: list[Part],
        asker: dict[str, str] | None,
        refusal: str | None = None,
    ) -> TaskStatusUpdateEvent:
        """Pause the turn: a person approves or denies the hop to `member` with their next message
        (`asker` caused the question: by default they may answer it). `refusal` says why the message
        just received did not answer it."""
        text = text_of(Message(parts=parts))
        roles, users = self.team.approver_rule(asker)
        pending = {
            "member": member,
            "reason": reason,
            "sender": sender,
            "text": text[:APPROVAL_TEXT],
            "approvers": {"roles": roles, "users": users},
        }
        self.conversation.pending = {
            **pending,
            "asker": asker,
            "parts": [MessageToDict(part) for part in parts],
            "trail": [hop.to_json() for hop in self.trail],  # the approved turn goes on from here
        }
        question = (
            f"Approve sending this to {member}? Why: {reason}. It would receive: {text[:APPROVAL_TEXT]}\n"
            "Answer 'approve' or 'deny'."
        )
        if refusal is not None:
            question = f"{refusal}\n{question}"
        event = self.final(INPUT_REQUIRED, [Part(text=question)])
        event.status.message.metadata.update({keys.APPROVAL: pending})
        return event

    def resume_approval(self) -> tuple[str, str, str, list[Part]] | TaskStatusUpdateEvent | None:
        """The caller's answer to a pending approval: where the turn goes (the member, or the default
        agent with a note), the question again for anything else, None when nothing is pending."""
        pending = self.conversation.pending
        if pending is None:
            return None
        parts = [ParseDict(item, Part()) for item in pending.get("parts", [])]
        member, sender = str(pending["member"]), str(pending.get("sender", client_routing.USER))
        self.trail = [Hop(**hop) for hop in pending.get("trail", [])]
        asker = pending.get("asker")
        answer = approval_answer(self.message)
        refusal = self.approval_refused(member, asker) if answer is not None else None
        if answer is None or refusal is not None:  # not an answer, or not the caller's to give
            return self.ask_approval(member, str(pending.get("reason", "")), sender, parts, asker, refusal)
        self.conversation.pending = None
        if answer:
            self.approved = member
            return member, f"approved by {self.who()}", sender, parts
        note = Part(text=f"[ranch] {self.who()} did not approve sending this to {member}.")
        default = self.team.default_agent
        return default, f"{member} denied by {self.who()}", sender, [*parts, note]

    def approval_refused(self, member: str, asker: dict[str, str] | None) -> str | None:
        """Why the caller may not answer the approval of the hop to `member`, None when they may: only
        a person (never an agent, nor an agent's message) to whom `member` is open, and one of the
        team's approvers. An open server's anonymous caller answers its own anonymous question."""
        caller = self.caller
        if caller is None and asker is None:
            why = None if self.open_to(member) else f"{member} is not open to them"
        elif caller is None or caller.kind != "person":
            why = "only a person may approve"
        elif not self.open_to(member):
            why = f"{member} is not open to them"
        elif not self.team.approver(caller, asker):
            why = "they are not one of its approvers"
        else:
            why = None
        if why is None:
            return None
        waits = self.approvers(member, asker)
        return f"[ranch] {self.who()} may not answer this question: {why}. It waits for {waits}."

    def approvers(self, member: str, asker: dict[str, str] | None) -> str:
        """Who may answer the approval of the hop to `member`, in words."""
        roles, users = self.team.approver_rule(asker)
        label = "the person who asked" if self.team.approvers is None else "user"
        named = [f"{label} '{user}'" for user in users]
        if roles:
            named.append(f"a person with the role {' or '.join(roles)}")
        who = " or ".join(named) or "nobody (the team names no approvers)"
        return f"{who}, to whom {member} is open" if member in self.team.access else who

    def used(self) -> int:
        """Hops made so far; a member team's count as the hops made inside it."""
        return sum(hop.weight for hop in self.trail)

    def spent(self) -> int:
        """Tokens the turn's hops reported."""
        return sum(hop.tokens or 0 for hop in self.trail)

    def check_hop_budget(self, target: str) -> None:
        limit = self.team.budget_tokens
        if limit is not None and self.spent() >= limit:  # no hop starts once the budget is spent
            ledger = [f"{hop.agent} {hop.tokens}" for hop in self.trail if hop.tokens]
            raise BudgetExceeded(self.team.id, self.spent(), limit, ledger)
        if self.used() >= self.budget:
            raise HopLimitExceeded(
                self.team.id, self.budget, describe(self.trail, target), inherited=self.inherited
            )

    async def traced_hop(
        self, target: str, sender: str, reason: str, parts: list[Part]
    ) -> AsyncIterator[TaskArtifactUpdateEvent | HopOutcome]:
        """`hop`, inside the hop's span when tracing is on (outbound calls become its children)."""
        if self.span is not None:
            attributes = {
                "ranch.team": self.team.id,
                "ranch.agent": target,
                "ranch.sender": sender,
                "ranch.chosen_because": reason,
                "ranch.hop": len(self.trail) + 1,
                "ranch.hops_remaining": self.budget - self.used(),
            }
            self.hop_span = tracing.start(f"ranch.hop {target}", attributes, parent=self.span)
        try:
            async for item in self.hop(target, sender, parts):
                yield item
        except BaseException as exc:
            if self.hop_span is not None:
                tracing.failed(self.hop_span, exc)
                self.end_hop_span()
            raise

    async def hop(
        self, target: str, sender: str, parts: list[Part]
    ) -> AsyncIterator[TaskArtifactUpdateEvent | HopOutcome]:
        """One hop: build the message, call the member, pass its text on as it comes, and end with
        its outcome.

        The member runs in a task of its own (`MemberCall`), inside `invoke`'s one timeout scope, and
        hands its events over a bounded stream: this generator yields between them holding no cancel
        scope, and a turn closed or cancelled mid-hop cancels the member as a cancellation (a remote
        member then cancels its peer's task too)."""
        agent = self.team.members[target]
        with tracing.current(self.hop_span):
            message = await self.outgoing(target, sender, parts)
        self.conversation.mark_seen(target)
        call = Call(extensions=frozenset(message.extensions), owner=self.owner, caller=self.caller)
        if not agent.streams_text:  # answers at once: called in place, nothing to pass on meanwhile
            with tracing.current(self.hop_span):
                outcome = await collect(agent, message, call)
            self.conversation.waiting_on = target if outcome.interrupted else None
            yield outcome
            return
        folded = TaskFold(agent.id)
        streamed = False
        with tracing.current(self.hop_span):  # the member's task copies this context: its spans nest
            member = MemberCall(agent, message, call)
        try:
            async for event in member.events:
                if folded.fold(event):
                    break
                chunk = self.chunk(event, target, streamed)
                if chunk is not None:
                    streamed = True
                    yield chunk
        except BaseException:  # cancelled, closed mid-hop, or failing: the member is stopped too
            member.stop()
            raise
        member.events.close()  # the answer is in: the member's call ends as a direct call's would
        await member.ended()
        outcome = folded.outcome()
        self.conversation.waiting_on = target if outcome.interrupted else None
        yield outcome

    def chunk(self, event: Event, target: str, streamed: bool) -> TaskArtifactUpdateEvent | None:
        """A member's streamed text as a chunk of its hop's artifact (the hop's reply replaces it
        whole when the hop ends); None for anything else it sends."""
        if not isinstance(event, TaskArtifactUpdateEvent) or event.last_chunk:
            return None
        text = [part for part in event.artifact.parts if part.WhichOneof("content") == "text"]
        if not text:
            return None
        artifact = Artifact(artifact_id=f"hop-{len(self.trail) + 1}-{target}", name=target, parts=text)
        return TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=artifact,
            append=streamed and event.append,
            last_chunk=False,
        )

    async def outgoing(self, target: str, sender: str, parts: list[Part]) -> Message:
        """The message `target` receives: unseen context, the content, and peers if it routes.

        It carries the team's contextId; a remote member maps it to its own ids (and
        resumes its input-required task), so each member keeps its own context.
        """
        agent = self.team.members[target]
        limit = agent.history_length if agent.history_length is not None else self.team.history_length
        context_part = context.render(self.conversation.unseen(target, limit))
        roster = await self.team.roster()
        message = Message(
            message_id=new_id(),
            role=ROLE_USER,
            context_id=self.context_id,
            parts=([context_part] if context_part else [])
            + modes.shown(parts, target, roster.infos[target].input_modes),
        )
        if roster.routes(target):
            only = self.handoffs
            if self.team.access:  # members closed to this caller are not offered
                only = [m for m in (only if only is not None else self.team.members) if self.open_to(m)]
            peers = roster.peers(exclude=target, only=only)
            if self.hop_span is not None:
                self.hop_span.set_attribute("ranch.peers", [peer["id"] for peer in peers])
            client_routing.attach_request_data(
                message,
                peers=peers,
                sender=sender,
                hops_remaining=self.budget - self.used(),
                trail=describe(self.trail),
                caller=self.caller.to_json() if self.caller is not None else None,
                seen=self.guard.shared(),
            )
        return message

    def outer_peer(self, name: str) -> bool:
        """Whether `name` is a peer of this team's caller (a team's Router): a member naming one ends
        this turn, and the decision passes outward. Members are offered their own team only."""
        return self.incoming is not None and any(card.id == name for card in self.incoming.agent_cards)

    def decide(self, target: str, sender: str, outcome: HopOutcome) -> tuple[Next, RoutingError | None]:
        """Where the turn goes next; an invalid recipient under the `error` policy is returned, not raised,
        so the failing hop is recorded first."""
        if outcome.interrupted:
            return Next(client_routing.USER, "asked for input"), None
        try:
            return self.next_recipient(target, sender, outcome), None
        except InvalidRecipient as exc:
            return Next(exc.recipient, f"invalid recipient '{exc.recipient}'", fallback=True), exc

    def next_recipient(self, target: str, sender: str, outcome: HopOutcome) -> Next:
        """Apply the contract's rules to the member's decision."""
        decision = outcome.decision
        self.handoffs = decision.handoffs if decision else None
        if decision is None:
            return self.without_decision(target)
        reason = decision.reason or f"{target} chose {decision.recipient}"
        if decision.recipient == client_routing.USER:
            if decision.on_done == client_routing.RETURN and target in self.team.routes:
                return self.without_decision(target)  # a member team's answer: our pipeline goes on
            self.outward = client_routing.RoutingDecision(recipient=client_routing.USER, reason=reason)
            return Next(client_routing.USER, reason)
        if decision.recipient == client_routing.SENDER:
            if sender == client_routing.USER:  # back to whoever called the team
                self.outward = client_routing.RoutingDecision(recipient=client_routing.SENDER, reason=reason)
            return Next(sender, reason)
        named = self.team.member(decision.recipient)
        if named is not None and named != target and not self.open_to(named):
            return self.closed(named, target)
        if named is not None and named != target:
            return Next(named, reason)
        if named is None and self.outer_peer(decision.recipient):  # a peer of the team's caller
            self.outward = client_routing.RoutingDecision(recipient=decision.recipient, reason=reason)
            return Next(client_routing.USER, f"to {decision.recipient}, outside {self.team.id}: {reason}")
        error = InvalidRecipient(target, decision.recipient, self.team.id)
        if self.team.on_invalid_recipient == "error":
            raise error
        note = f"[ranch] {error}; the turn went back to '{self.team.default_agent}'."
        if target == self.team.default_agent:
            note = f"[ranch] {error}; the turn ended."
            return Next(client_routing.USER, f"invalid recipient '{decision.recipient}'", note, fallback=True)
        return Next(
            self.team.default_agent,
            f"invalid recipient '{decision.recipient}', fallback",
            note,
            fallback=True,
        )

    def without_decision(self, target: str) -> Next:
        static = self.team.routes.get(target)
        if static is not None and static != client_routing.USER and not self.open_to(static):
            return self.closed(static, target)
        if static is not None:
            return Next(static, "static route", static=True)
        if target == self.team.default_agent:
            return Next(client_routing.USER, "default agent answered")
        if self.pipeline:  # its last stage: the pipeline does not start again
            return Next(client_routing.USER, "end of the pipeline")
        return Next(self.team.default_agent, "no decision; back to the default agent", fallback=True)

    def guard_loop(self, target: str, step: Next, outcome: HopOutcome) -> tuple[Next, RoutingError | None]:
        """A loop (`LoopGuard`: a repeated text, a cycle going round again, hops with nothing new) goes
        where the team's `on_loop` says: to the default agent once with a note, to the user, or fails."""
        if step.recipient == client_routing.USER:
            return step, None
        loop = self.guard.check(target, step.recipient, outcome.text, outcome.trail)
        if loop is None:
            return step, None
        self.guard.reset()
        self.loops += 1
        if self.team.on_loop == "fail":
            error = RoutingLoop(self.team.id, loop.edge, loop.count, loop.said)
            return Next(step.recipient, loop.reason, loop=True), error
        said = f"[ranch] {loop.said}"
        if self.team.on_loop == "default" and self.loops == 1 and target != self.team.default_agent:
            note = f"{said}; the turn went to '{self.team.default_agent}'."
            return Next(self.team.default_agent, loop.reason, note, fallback=True, loop=True), None
        return Next(client_routing.USER, loop.reason, f"{said}; the turn ended.", loop=True), None

    def record(self, agent: str, sender: str, step: Next, ms: float, outcome: HopOutcome) -> Hop:
        """Add the hop to the trail; a problem with the member's routing data is named there and in
        a `[ranch]` note the turn's next message carries (docs/routing.md, "Malformed routing data")."""
        problem = self.routing_problem(outcome)
        if problem is not None:
            said = f"[ranch] {agent}'s routing data: {problem}."
            step.note = f"{step.note}\n{said}" if step.note else said
        hop = Hop(
            agent=agent, sender=sender, recipient=step.recipient, reason=step.reason, ms=ms,
            trail=outcome.trail, loop=step.loop, tokens=outcome.tokens, problem=problem,
        )  # fmt: skip
        self.trail.append(hop)
        return hop

    def routing_problem(self, outcome: HopOutcome) -> str | None:
        """The answer's malformed fields, and `handoffs` naming ids that are neither members nor the
        caller's peers (the peers offered leave them out)."""
        handoffs = outcome.decision.handoffs if outcome.decision is not None else None
        strangers = [h for h in handoffs or () if h not in self.team.members and not self.outer_peer(h)]
        if not strangers:
            return outcome.problem
        found = client_routing.strangers_problem(strangers, self.team.id)
        return f"{outcome.problem}; {found}" if outcome.problem else found

    # -- what operators see: spans and metrics (docs/observability.md) ------------------------

    def turn_attributes(self) -> dict[str, Any]:
        return {
            "ranch.team": self.team.id,
            "ranch.context_id": self.context_id,
            "ranch.task_id": self.task_id,
            "ranch.max_hops": self.team.max_hops,
            "ranch.budget": self.budget,
        }

    def observe_hop(self, hop: Hop, step: Next, invalid: RoutingError | None) -> None:
        metrics.hop(self.team.id, hop.agent, hop.ms / 1000)
        span = self.hop_span
        if span is None:
            return
        span.set_attribute("ranch.recipient", hop.recipient)
        span.set_attribute("ranch.reason", hop.reason)
        span.set_attribute("ranch.fallback", step.fallback)
        if step.loop:
            span.set_attribute("ranch.loop", True)
        if hop.problem is not None:
            span.set_attribute("ranch.routing.problem", hop.problem)
        if invalid is not None:
            tracing.failed(span, invalid)
        self.end_hop_span()

    def end_hop_span(self) -> None:
        if self.hop_span is not None:
            self.hop_span.end()
            self.hop_span = None

    def observe_turn(self, began: float, state: TaskState) -> None:
        metrics.turn(self.team.id, time.perf_counter() - began, len(self.trail))
        span = self.span
        if span is None:
            return
        self.end_hop_span()  # a turn cancelled mid-hop
        span.set_attribute("ranch.hops", len(self.trail))
        span.set_attribute("ranch.state", TaskState.Name(state))
        span.end()

    # -- events -------------------------------------------------------------------------------

    def working(self, target: str, sender: str, reason: str) -> TaskStatusUpdateEvent:
        hop = {"agent": target, "sender": sender, "reason": reason, "hop": len(self.trail) + 1}
        text = f"{target} is working (hop {hop['hop']}: {reason})"
        return self.status(WORKING, [Part(text=text)], {HOP_KEY: hop})

    def reply_artifact(self, outcome: HopOutcome, hop: Hop) -> TaskArtifactUpdateEvent:
        """The member's reply with its hop record, so a canceled task still shows its route."""
        number = len(self.trail)
        artifact = Artifact(
            artifact_id=f"hop-{number}-{outcome.agent}",
            name=outcome.agent,
            parts=outcome.parts,
            metadata=_struct({HOP_KEY: {**hop.to_json(), "hop": number}}),
        )
        return TaskArtifactUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, artifact=artifact, last_chunk=True
        )

    def final(
        self, state: TaskState, parts: list[Part], error: RanchError | None = None
    ) -> TaskStatusUpdateEvent:
        data: dict[str, Any] = {"trail": [hop.to_json() for hop in self.trail], "hops": self.used()}
        if any(hop.tokens is not None for hop in self.trail):  # the ledger: per hop above, the total here
            data["usage"] = {"totalTokens": self.spent()}
        if state == COMPLETED and self.outward is not None:  # the caller's Router honours it
            data.update(self.outward.model_dump(by_alias=True, exclude_none=True))
            if self.outward.recipient == client_routing.USER and self.team.on_done == client_routing.RETURN:
                data["onDone"] = client_routing.RETURN  # our answer: the caller's static route applies
        if error is not None:
            data["error"] = {"type": type(error).__name__, "message": str(error)}
            if isinstance(error, AgentError):
                data["error"]["agent"] = error.agent
        event = self.status(state, parts, None)
        event.metadata.update({client_routing.URI: data})
        return event

    def status(
        self, state: TaskState, parts: list[Part], metadata: dict[str, Any] | None
    ) -> TaskStatusUpdateEvent:
        message = Message(
            message_id=new_id(),
            role=ROLE_AGENT,
            context_id=self.context_id,
            task_id=self.task_id,
            parts=parts,
            metadata=_struct(metadata) if metadata else None,
        )
        now = Timestamp()
        now.FromNanoseconds(time.time_ns())
        return TaskStatusUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            status=TaskStatus(state=state, message=message, timestamp=now),
        )


def _struct(data: dict[str, Any]) -> Struct:
    struct = Struct()
    struct.update(data)
    return struct


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
