"""The team task's A2A events a turn yields: a WORKING status naming each hop's agent and why, the
member's text as it streams, an artifact with each reply and its hop record, and one final status.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from a2a.types import (
    Artifact,
    Message,
    Part,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from google.protobuf.struct_pb2 import Struct
from google.protobuf.timestamp_pb2 import Timestamp

from ranch.agents.base import Event
from ranch.agents.fold import HopOutcome
from ranch.ids import new_id
from ranch.routing.trail import Hop
from ranch.wire.events import ROLE_AGENT, WORKING

HOP_KEY = "ranch.hop"
"""Metadata key on per-hop status messages and artifacts: {agent, sender, reason, hop}."""


@dataclass(frozen=True)
class TurnEvents:
    """Builds the events of one turn of the team task `task_id`."""

    task_id: str
    context_id: str

    def working(self, target: str, sender: str, reason: str, number: int) -> TaskStatusUpdateEvent:
        """Hop `number` starts: `target` works on what `sender` sent, chosen for `reason`."""
        hop = {"agent": target, "sender": sender, "reason": reason, "hop": number}
        text = f"{target} is working (hop {number}: {reason})"
        return self.status(WORKING, [Part(text=text)], {HOP_KEY: hop})

    def chunk(self, event: Event, target: str, number: int, streamed: bool) -> TaskArtifactUpdateEvent | None:
        """A member's streamed text as a chunk of hop `number`'s artifact (the hop's reply replaces it
        whole when the hop ends); None for anything else it sends."""
        if not isinstance(event, TaskArtifactUpdateEvent) or event.last_chunk:
            return None
        text = [part for part in event.artifact.parts if part.WhichOneof("content") == "text"]
        if not text:
            return None
        artifact = Artifact(artifact_id=f"hop-{number}-{target}", name=target, parts=text)
        return TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=artifact,
            append=streamed and event.append,
            last_chunk=False,
        )

    def reply(self, outcome: HopOutcome, hop: Hop, number: int) -> TaskArtifactUpdateEvent:
        """The member's reply with its hop record, so a canceled task still shows its route."""
        artifact = Artifact(
            artifact_id=f"hop-{number}-{outcome.agent}",
            name=outcome.agent,
            parts=outcome.parts,
            metadata=struct({HOP_KEY: {**hop.to_json(), "hop": number}}),
        )
        return TaskArtifactUpdateEvent(
            task_id=self.task_id, context_id=self.context_id, artifact=artifact, last_chunk=True
        )

    def status(
        self, state: TaskState, parts: list[Part], metadata: dict[str, Any] | None
    ) -> TaskStatusUpdateEvent:
        message = Message(
            message_id=new_id(),
            role=ROLE_AGENT,
            context_id=self.context_id,
            task_id=self.task_id,
            parts=parts,
            metadata=struct(metadata) if metadata else None,
        )
        now = Timestamp()
        now.FromNanoseconds(time.time_ns())
        return TaskStatusUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            status=TaskStatus(state=state, message=message, timestamp=now),
        )


def struct(data: dict[str, Any]) -> Struct:
    value = Struct()
    value.update(data)
    return value
