"""A `kind: python` agent: route long questions to a specialist, answer short ones yourself.

agents:
  - id: gatekeeper
    kind: python
    entry: examples.my_agent:Gatekeeper
    client_routing: true
    options: {specialist: researcher}
"""

from __future__ import annotations

from collections.abc import AsyncGenerator

from a2a.types import Message

from ranch import Call, Event, RoutingDecision, read_routing_request, reply, text_of


class Gatekeeper:
    def __init__(self, agent_id: str, specialist: str) -> None:
        self.agent_id = agent_id
        self.specialist = specialist

    async def run(self, message: Message, call: Call) -> AsyncGenerator[Event | str, None]:
        text = text_of(message)
        peers = read_routing_request(message)  # None when the agent is called outside a team
        if len(text) > 80 and peers and any(p.id == self.specialist for p in peers.agent_cards):
            decision = RoutingDecision(recipient=self.specialist, reason="long question")
            yield reply(message, f"Passing this to {self.specialist}.", decision)
        else:
            yield f"Short answer: {text[:40]}"
