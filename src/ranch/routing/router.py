"""The Router: one user turn through a team, hop by hop (docs/routing.md, section 2).

`Turn.run` is the whole algorithm on one screen; the phases it calls (pick the first recipient,
build the hop's message, send it, resolve the next recipient) are the methods below it. What
bounds a turn (`routing.limits`), the caller's approval (`routing.approval`), the events it yields
(`routing.events`) and what operators see of it (`routing.observing`) live in modules of their
own. A turn yields the team task's A2A events: a WORKING status naming each agent and why it was
chosen, an artifact with each reply, and one final status (COMPLETED, INPUT_REQUIRED or FAILED)
whose metadata holds the trail. A turn the engine runs as an A2A task writes a checkpoint as each hop
starts, and one taken over from a stopped replica goes on from it (`routing.durable`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from a2a.types import Artifact, Message, Part, Task, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent

from ranch.agents.base import Agent, Call, Event, text_of
from ranch.agents.fold import HopOutcome, TaskFold, collect
from ranch.agents.invoke import MemberCall
from ranch.exceptions import AgentError, Forbidden, InvalidRecipient, RanchError, RoutingError
from ranch.identity.caller import Caller
from ranch.ids import new_id
from ranch.observe import metrics, tracing
from ranch.routing import context
from ranch.routing.approval import Approval, approval_answer, who
from ranch.routing.durable import Checkpoint, CheckpointStore, Reattached
from ranch.routing.events import HOP_KEY, TurnEvents
from ranch.routing.limits import Limits
from ranch.routing.observing import TurnObserver
from ranch.routing.steps import Next, Way
from ranch.routing.trail import Hop, Trail, describe
from ranch.wire import client_routing, keys, modes
from ranch.wire.events import COMPLETED, FAILED, INPUT_REQUIRED, ROLE_USER

if TYPE_CHECKING:
    from ranch.routing.team import Team

__all__ = ["HOP_KEY", "Next", "Turn", "approval_answer"]

logger = logging.getLogger(__name__)

Ending = TaskStatusUpdateEvent
"""A turn's final status: it answers, asks, or failed."""


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
        checkpoints: CheckpointStore | None = None,
    ) -> None:
        self.team = team
        self.owner = owner
        """Whose conversation this is; passed on to every member, so nested teams and remote
        members keep their state per owner too."""
        self.caller = caller
        """Who the turn is for: shown to routing members, read by the team's access and approval rules."""
        self.conversation = conversation
        self.message = message
        self.task_id = task_id
        self.context_id = message.context_id
        self.trail = Trail()
        self.handoffs: list[str] | None = None
        self.incoming = client_routing.read_request(message)
        """The routing data of a caller that is itself a team's Router (this team is its member)."""
        self.limits = Limits.of_turn(
            team.id,
            team.max_hops,
            team.budget_tokens,
            (team.loop_repeats, team.loop_cycles, team.on_loop),
            team.default_agent,
            self.incoming,
        )
        self.outward: client_routing.RoutingDecision | None = None
        """The decision the turn ends with, for a caller that routes (docs/routing.md, "Teams of teams")."""
        self.pipeline = False
        """The hop in flight came down a chain of static routes that began at the default agent."""
        self.approval = Approval(team, caller, conversation)
        self.after: Way | Ending | None = None
        """Where the turn goes after the hop just made, or how it ends (`hop_through`)."""
        self.approved: str | None = None
        """The member the caller just approved: its next hop does not ask again."""
        self.events = TurnEvents(task_id, self.context_id)
        self.observer = TurnObserver(team.id)
        self.checkpoints = checkpoints
        """Where the turn writes its checkpoint as each hop starts; None: it is not resumed elsewhere."""
        self.reattach = ""
        """The member's own task of the hop in flight when the turn was resumed: re-attached to."""
        self.ended = False
        """Its final status was given: a turn stopped before that (its replica stopping) is resumed."""
        self.checkpointed = False
        """A checkpoint of it was written (or it was resumed from one): deleted once it ends."""
        self.replies: list[Artifact] = []
        """The hops' replies so far, kept in its checkpoints (a task resumed after a restart shows them)."""

    async def run(self, resumed: Checkpoint | None = None) -> AsyncIterator[Event]:
        """The algorithm: hop until a recipient is the user, an agent asks, or something fails; a
        turn `resumed` from its checkpoint goes on with the hop that was in flight."""
        if resumed is None:
            self.conversation.add(client_routing.USER, text_of(self.message))
        self.observer.begin(self.turn_attributes)
        state = FAILED
        try:
            way = self.start() if resumed is None else self.resume(resumed)
            announced = resumed.way if resumed is not None else None  # its hop started before the stop
            while isinstance(way, Way):
                self.limits.check(self.trail, way.target)
                if way.target in self.team.approval and way.target != self.approved:
                    way = self.ask_approval(way, self.caller.to_json() if self.caller is not None else None)
                    break
                self.approved = None
                if way is not announced:
                    await self.before_hop(way)
                    yield self.events.working(way.target, way.sender, way.reason, len(self.trail) + 1)
                async for event in self.hop_through(way):
                    yield event  # the member's text as it comes, then its reply with the hop's record
                assert self.after is not None  # a hop ends with where the turn goes, or raises
                way = self.after  # where the turn goes next, or how it ends
            state = way.status.state
            self.ended = True
            yield way
        except RanchError as exc:
            metrics.error(type(exc).__name__)
            self.observer.failed(exc)
            self.ended = True
            yield self.final(FAILED, [Part(text=str(exc))], error=exc)
        except GeneratorExit:  # its reader stopped after the final event (or gave up): not a failure
            raise
        except BaseException as exc:  # cancelled, or ranch's own bug: the span says so too
            self.observer.failed(exc)
            raise
        finally:
            self.observer.end(state, len(self.trail))

    # -- phases -------------------------------------------------------------------------------

    def start(self) -> Way | Ending:
        """Where the turn begins: the answer to a pending approval, else its first recipient with
        the caller's message; or the approval question again, when the message does not answer it."""
        resumed = self.resume_approval()
        if resumed is not None:
            return resumed
        target, reason = self.first_recipient()
        return Way(target, reason, client_routing.USER, list(self.message.parts))

    def resume(self, checkpoint: Checkpoint) -> Way | Ending:
        """Where a turn taken over from a stopped replica goes on: the hop that was in flight,
        re-attached to or run again, or (the member's `resume`) past it to the default agent with a
        note, or the turn fails. The hop and its approval were announced before the stop."""
        self.trail, self.handoffs, self.pipeline = checkpoint.trail, checkpoint.handoffs, checkpoint.pipeline
        self.replies, self.checkpointed = list(checkpoint.replies), True
        if checkpoint.outward is not None:
            self.outward = client_routing.RoutingDecision.model_validate(checkpoint.outward)
        way = checkpoint.way
        agent = self.team.members.get(way.target)
        if agent is None:
            raise RoutingError(f"team '{self.team.id}': {way.target}, whose hop was resumed, is not a member")
        self.approved = way.target
        if checkpoint.member_task and agent.reattaches:
            self.reattach = checkpoint.member_task
            return way
        if agent.resume == "rerun":
            return way
        lost = f"{way.target}'s hop was in flight when the server running this turn stopped"
        if agent.resume == "fail":
            raise AgentError(way.target, f"{lost} (resume: fail)")
        default = self.team.default_agent
        self.trail.append(Hop(agent=way.target, sender=way.sender, recipient=default, reason="lost", ms=0.0))
        note = Part(text=f"[ranch] {lost}; what it did is unknown, and the turn went to '{default}'.")
        return Way(default, f"{way.target}'s hop was lost", way.target, [*way.parts, note])

    async def before_hop(self, way: Way) -> None:
        """Write where the turn is before `way` starts, committed, unless its member answers at once
        and runs again safely (`rules`, `echo`): a stop during such a hop resumes from the checkpoint
        before it, and the hop runs again (`routing.durable`)."""
        member = self.team.members[way.target]
        if member.streams_text or member.resume != "rerun":
            await self.checkpoint(way)

    async def checkpoint(self, way: Way, member_task: str = "", *, wait: bool = True) -> None:
        """Write where the turn is as `way` starts (with the member's own task once it names it), in
        one transaction with the conversation so far: committed before it returns, or (not `wait`)
        with the next write. A write that fails leaves the turn going on."""
        store = self.checkpoints
        if store is None:
            return
        team = self.team
        try:
            await team.conversations.persist(team.id, self.owner, self.context_id, self.conversation)
            checkpoint = Checkpoint(
                task_id=self.task_id, owner=self.owner, team_id=team.id, message=self.message,
                caller=self.caller, trail=self.trail, way=way, handoffs=self.handoffs,
                pipeline=self.pipeline, member_task=member_task, version=self.conversation.version,
                replies=self.replies,
                outward=self.outward.model_dump(by_alias=True, exclude_none=True) if self.outward else None,
            )  # fmt: skip
            self.checkpointed = True
            await store.save_checkpoint(self.task_id, self.owner, team.id, checkpoint.state(), wait=wait)
        except Exception:  # the turn goes on; another replica could only resume it from further back
            logger.warning("team %s: could not checkpoint task %s", team.id, self.task_id, exc_info=True)

    async def hop_through(self, way: Way) -> AsyncIterator[TaskArtifactUpdateEvent]:
        """One hop and what follows it: the member's text as it comes and its reply; then `after` is
        where the turn goes next (or its end)."""
        target, sender = way.target, way.sender
        started = time.perf_counter()
        outcome: HopOutcome | None = None
        # the hop inside its span when tracing is on (outbound calls become its children)
        if self.observer.span is not None:
            self.observer.hop_started(target, self.hop_attributes(target, sender, way.reason))
        try:
            async for item in self.hop(way):
                if isinstance(item, HopOutcome):
                    outcome = item
                else:
                    yield item
        except BaseException as exc:
            self.observer.hop_failed(exc)
            raise
        assert outcome is not None  # a hop ends with its outcome, or raises
        ms = round((time.perf_counter() - started) * 1000, 3)
        self.conversation.add(target, outcome.text)
        self.conversation.mark_seen(target)  # its own reply is not news to it
        step, invalid = self.decide(target, sender, outcome)
        if invalid is None and not outcome.interrupted:
            step, invalid = self.limits.guard_loop(target, step, outcome)
        # a chain of static routes from the default agent is a pipeline (docs/routing.md, 2.4)
        self.pipeline = step.static and (self.pipeline or target == self.team.default_agent)
        hop = self.record(target, sender, step, ms, outcome)
        self.observer.hop_done(hop, step, invalid)
        reply = self.events.reply(outcome, hop, len(self.trail))  # the hop's record travels with its reply
        if self.checkpoints is not None:
            self.replies.append(reply.artifact)
        yield reply
        if invalid is not None:
            raise invalid
        if outcome.interrupted:
            self.after = self.paused(outcome)
            return
        parts = outcome.parts + ([Part(text=step.note)] if step.note else [])
        if step.recipient == client_routing.USER:
            self.after = self.final(COMPLETED, parts)
            return
        self.after = Way(step.recipient, step.reason, target, parts)

    def paused(self, outcome: HopOutcome) -> Ending:
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
        return who(self.caller)

    def ask_approval(self, way: Way, asker: dict[str, str] | None, refusal: str | None = None) -> Ending:
        """Pause the turn before `way`: a person approves or denies the hop with their next message."""
        question, pending = self.approval.ask(way, asker, self.trail, refusal)
        event = self.final(INPUT_REQUIRED, [Part(text=question)])
        event.status.message.metadata.update({keys.APPROVAL: pending})
        return event

    def resume_approval(self) -> Way | Ending | None:
        """The caller's answer to a pending approval: where the turn goes (the member, or the default
        agent with a note), the question again for anything else, None when nothing is pending."""
        waiting = self.approval.waiting()
        if waiting is None:
            return None
        way, self.trail, asker = waiting
        answer = approval_answer(self.message)
        refusal = self.approval.refused(way.target, asker) if answer is not None else None
        if answer is None or refusal is not None:  # not an answer, or not the caller's to give
            return self.ask_approval(way, asker, refusal)
        if answer:
            self.approved = way.target
        return self.approval.answered(way, answer)

    # -- one hop --------------------------------------------------------------------------------

    async def hop(self, way: Way) -> AsyncIterator[TaskArtifactUpdateEvent | HopOutcome]:
        """One hop: build the message, call the member, pass its text on as it comes, and end with
        its outcome.

        The member runs in a task of its own (`MemberCall`), inside `invoke`'s one timeout scope, and
        hands its events over a bounded stream: this generator yields between them holding no cancel
        scope, and a turn closed or cancelled mid-hop cancels the member as a cancellation (a remote
        member then cancels its peer's task too). A member that names its own task while a checkpoint
        is kept has that task written to it, so a turn resumed elsewhere re-attaches instead of sending
        again (`routing.durable`)."""
        target = way.target
        agent: Agent = self.team.members[target]
        if self.reattach:  # resumed: the member already has the message, as its task `reattach`
            agent, self.reattach = Reattached(agent, self.reattach), ""
            message = Message(message_id=new_id(), role=ROLE_USER, context_id=self.context_id)
        else:
            with tracing.current(self.observer.hop_span):
                message = await self.outgoing(target, way.sender, way.parts)
        self.conversation.mark_seen(target)
        call = Call(extensions=frozenset(message.extensions), owner=self.owner, caller=self.caller)
        if not agent.streams_text:  # answers at once: called in place, nothing to pass on meanwhile
            with tracing.current(self.observer.hop_span):
                outcome = await collect(agent, message, call)
            self.conversation.waiting_on = target if outcome.interrupted else None
            yield outcome
            return
        folded = TaskFold(agent.id)
        streamed = False
        named = self.checkpoints is None or not agent.reattaches  # nothing to write down
        with tracing.current(self.observer.hop_span):  # the member's task copies this context: its spans nest
            member = MemberCall(agent, message, call)
        try:
            async for event in member.events:
                if not named and not isinstance(event, Message):
                    named = True  # its first task event names its task
                    await self.checkpoint(
                        way, event.id if isinstance(event, Task) else event.task_id, wait=False
                    )
                if folded.fold(event):
                    break
                chunk = self.events.chunk(event, target, len(self.trail) + 1, streamed)
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
            if self.observer.hop_span is not None:
                self.observer.hop_span.set_attribute("ranch.peers", [peer["id"] for peer in peers])
            client_routing.attach_request_data(
                message,
                peers=peers,
                sender=sender,
                hops_remaining=self.limits.remaining(self.trail),
                trail=describe(self.trail),
                caller=self.caller.to_json() if self.caller is not None else None,
                seen=self.limits.guard.shared(),
            )
        return message

    def outer_peer(self, name: str) -> bool:
        """Whether `name` is a peer of this team's caller (a team's Router): a member naming one ends
        this turn, and the decision passes outward. Members are offered their own team only."""
        return self.incoming is not None and any(card.id == name for card in self.incoming.agent_cards)

    def caller_out_of_hops(self) -> bool:
        """Whether this turn is its caller's last hop (`hopsRemaining` 1, this hop included): the
        caller's Router has no hop left for a peer this team would name."""
        remaining = self.incoming.hops_remaining if self.incoming is not None else None
        return remaining is not None and remaining <= 1

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
            if self.caller_out_of_hops():  # passed outward, it would end the caller's turn FAILED
                why = f"{reason}; {decision.recipient} not reached: the caller has no hop left"
                self.outward = client_routing.RoutingDecision(recipient=client_routing.USER, reason=why)
                return Next(client_routing.USER, why)
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
            "ranch.budget": self.limits.budget,
        }

    def hop_attributes(self, target: str, sender: str, reason: str) -> dict[str, Any]:
        return {
            "ranch.team": self.team.id,
            "ranch.agent": target,
            "ranch.sender": sender,
            "ranch.chosen_because": reason,
            "ranch.hop": len(self.trail) + 1,
            "ranch.hops_remaining": self.limits.remaining(self.trail),
        }

    # -- the end ------------------------------------------------------------------------------

    def final(self, state: TaskState, parts: list[Part], error: RanchError | None = None) -> Ending:
        """The turn's final status; its metadata holds the trail, what it used, and the decision it
        passes outward."""
        data: dict[str, Any] = {"trail": self.trail.to_json(), "hops": self.trail.used()}
        if self.trail.reported():  # the ledger: per hop above, the total here
            data["usage"] = {"totalTokens": self.trail.spent()}
        if state == COMPLETED and self.outward is not None:  # the caller's Router honours it
            data.update(self.outward.model_dump(by_alias=True, exclude_none=True))
            if self.outward.recipient == client_routing.USER and self.team.on_done == client_routing.RETURN:
                data["onDone"] = client_routing.RETURN  # our answer: the caller's static route applies
        if error is not None:
            data["error"] = {"type": type(error).__name__, "message": str(error)}
            if isinstance(error, AgentError):
                data["error"]["agent"] = error.agent
        event = self.events.status(state, parts, None)
        event.metadata.update({client_routing.URI: data})
        return event
