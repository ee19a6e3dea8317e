"""The routing scenarios an agent that declares client-routing v1 is put through, and their verdicts.

Each scenario is one plain-language request with the extension's request data, as a team's router
would send it; the peers and texts are fixed and documented (docs/extension/client-routing-v1.md,
"Conformance") so a deterministic agent can be set up for them. Every answer is read with
`client_routing.read_checked`, so routing data the schema rejects fails the scenario, named.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import httpx
from a2a.types import Message, Task, TaskState
from google.protobuf.json_format import MessageToDict

from ranch.conform.probe import Agent, Answer
from ranch.wire import client_routing
from ranch.wire.client_routing import SENDER, URI, USER

BILLING: dict[str, Any] = {
    "id": "conform-billing",
    "name": "Billing",
    "description": "Handles invoices, refunds and payments.",
    "capabilities": ["billing", "invoices"],
    "supportsClientRouting": False,
}
MAPS: dict[str, Any] = {
    "id": "conform-maps",
    "name": "Maps",
    "description": "Draws maps of places.",
    "capabilities": ["maps"],
    "supportsClientRouting": False,
}
ASK_BILLING = "Conformance check: an invoice is wrong. Please hand this to billing."
GIVE_BACK = "Conformance check: here is the map you asked for. Please send this back to whoever sent it."
TITLES = {
    "declares": "the card declares the extension",
    "valid-recipient": "answers with a valid recipient",
    "reads-peers": "reads the peers it is offered",
    "back-to-sender": "goes back to `sender`",
    "hops-remaining": "respects hopsRemaining",
    "not-negotiated": "ignores the extension when not negotiated",
}
ENDED = {
    TaskState.TASK_STATE_FAILED: "FAILED",
    TaskState.TASK_STATE_REJECTED: "REJECTED",
    TaskState.TASK_STATE_CANCELED: "CANCELED",
}


@dataclass
class Outcome:
    """One scenario's verdict: `passed` None means it was not run (the card declares nothing)."""

    id: str
    title: str
    passed: bool | None
    detail: str


@dataclass
class Report:
    """Every scenario's outcome for the agent at `url`."""

    url: str
    agent: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(outcome.passed for outcome in self.outcomes)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "agent": self.agent,
            "passed": self.passed,
            "scenarios": [asdict(o) for o in self.outcomes],
        }


def request(peers: list[dict[str, Any]], sender: str = USER, hops: int = 5) -> dict[str, Any]:
    """The request data a router sends: `peers` offered, `sender`, the hops left (this one included)."""
    return {
        "agentCards": peers,
        "sender": sender,
        "hopsRemaining": hops,
        "trail": [] if sender == USER else [sender],
    }


@dataclass
class Read:
    """What an answer says as routing: its recipient, or why it cannot count (`failure`)."""

    recipient: str | None = None
    reason: str | None = None
    failure: str | None = None
    hops: float | None = None

    def said(self) -> str:
        if self.recipient is None:
            return "named no recipient"
        return f"answered {self.recipient}" + (f" ({self.reason})" if self.reason else "")


def read(answer: Answer) -> Read:
    """The routing an answer carries; a transport error, a failed task or schema problems fail it."""
    reply = answer.reply
    if reply is None:
        return Read(failure=answer.error or "no answer")
    if isinstance(reply, Task) and reply.status.state in ENDED:
        said = " ".join(part.text for part in reply.status.message.parts if part.text)
        return Read(failure=f"the task ended {ENDED[reply.status.state]}: {said[:200]}")
    decision, problem = client_routing.read_checked(reply)
    if problem is not None:
        return Read(failure=f"its routing data does not match the schema: {problem}")
    return Read(
        recipient=decision.recipient if decision else None,
        reason=decision.reason if decision else None,
        hops=_reported_hops(reply),
    )


def _reported_hops(reply: Message | Task) -> float | None:
    """`hops` in the answer's routing data (a team says how many it made), where the decision is read."""
    places = (
        [reply.metadata] if isinstance(reply, Message) else [reply.status.message.metadata, reply.metadata]
    )
    for metadata in places:
        data = MessageToDict(metadata).get(URI)
        if isinstance(data, dict) and isinstance(data.get("hops"), int | float):
            return float(data["hops"])
    return None


def valid_recipient(answer: Read, peers: list[dict[str, Any]]) -> tuple[bool, str]:
    if answer.failure is not None:
        return False, answer.failure
    allowed = [USER, SENDER, *(peer["id"] for peer in peers)]
    if answer.recipient is None:
        return False, f"named no recipient; expected one of {', '.join(allowed)}"
    if answer.recipient not in allowed:
        return False, f"{answer.said()}, which is none of {', '.join(allowed)}"
    return True, answer.said()


def reads_peers(offered: Read, withheld: Read) -> tuple[bool, str]:
    """Billing offered: it is chosen. Billing not offered (only maps): it is not named."""
    if offered.failure is not None or withheld.failure is not None:
        return False, offered.failure or withheld.failure or ""
    if offered.recipient != BILLING["id"]:
        return False, f"with {BILLING['id']} offered for an invoice, it {offered.said()}"
    if withheld.recipient == BILLING["id"]:
        return False, f"with only {MAPS['id']} offered, it still answered {BILLING['id']}"
    ok, said = (
        valid_recipient(withheld, [MAPS]) if withheld.recipient is not None else (True, withheld.said())
    )
    return ok, f"{offered.said()}; with only {MAPS['id']} offered, {said}"


def back_to_sender(answer: Read) -> tuple[bool, str]:
    if answer.failure is not None:
        return False, answer.failure
    if answer.recipient in (SENDER, MAPS["id"]):
        return True, answer.said()
    return False, f"{answer.said()}; expected sender (or {MAPS['id']}, who sent it)"


def hops_remaining(answer: Read) -> tuple[bool, str]:
    """On the last hop (hopsRemaining 1) no peer can be reached: the answer goes to the user."""
    if answer.failure is not None:
        return False, answer.failure
    if answer.hops is not None and answer.hops > 1:
        return False, f"made {answer.hops:g} hops with hopsRemaining 1"
    if answer.recipient in (BILLING["id"], MAPS["id"]):
        return False, f"{answer.said()} with hopsRemaining 1: no hop is left for a peer"
    return True, answer.said()


def not_negotiated(answer: Answer, required: bool) -> tuple[bool, str]:
    """A plain message (no header, no data): answered as usual, the extension not activated; an agent
    that requires the extension refuses it with ExtensionSupportRequiredError (-32008) instead."""
    if required:
        ok = answer.error_code == -32008 or (answer.error or "").startswith("HTTP 400")
        return (
            ok,
            "refused as the card requires the extension"
            if ok
            else f"expected -32008; got {answer.error or 'an answer'}",
        )
    if URI in answer.activated:
        return False, "its A2A-Extensions response header activates the extension, which was not asked for"
    got = read(answer)
    if got.failure is not None:
        return False, got.failure
    return True, f"answered as a plain A2A agent ({got.said()})"


async def run(url: str, *, key: str | None = None, answer_within: float = 30.0) -> Report:
    """Run every scenario against the agent at `url`; `probe.Unreachable` when it cannot be tested."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx.AsyncClient(timeout=answer_within, headers=headers) as client:
        agent = await Agent.open(url, client)
        report = Report(url=url, agent=str(agent.card.get("name") or url))
        declared = agent.declaration()
        outcome = (
            declared is not None,
            f"capabilities.extensions lists {URI}"
            if declared
            else f"no entry for {URI} in capabilities.extensions",
        )
        report.outcomes.append(Outcome("declares", TITLES["declares"], *outcome))
        if declared is None:
            report.outcomes += [
                Outcome(id, title, None, "not run: the card does not declare the extension")
                for id, title in TITLES.items()
                if id != "declares"
            ]
            return report
        both = [BILLING, MAPS]
        offered = read(await agent.send(ASK_BILLING, request(both)))
        withheld = read(await agent.send(ASK_BILLING, request([MAPS])))
        returned = read(await agent.send(GIVE_BACK, request(both, sender=MAPS["id"])))
        last = read(await agent.send(ASK_BILLING, request(both, hops=1)))
        plain = await agent.send(ASK_BILLING, None)
        verdicts = {
            "valid-recipient": valid_recipient(offered, both),
            "reads-peers": reads_peers(offered, withheld),
            "back-to-sender": back_to_sender(returned),
            "hops-remaining": hops_remaining(last),
            "not-negotiated": not_negotiated(plain, bool(declared.get("required"))),
        }
        report.outcomes += [Outcome(id, TITLES[id], ok, detail) for id, (ok, detail) in verdicts.items()]
    return report
