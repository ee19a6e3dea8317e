"""A task-making agent for the A2A conformance suite (docs/conformance.md), as `kind: python`.

Every message becomes a task: WORKING, a short pause, an artifact echoing the text, then
COMPLETED with the answer. A message whose id starts with `test-resubscribe-message-id`
works for 2 x TCK_STREAMING_TIMEOUT seconds (the suite's requirement for its resubscribe
tests). See examples/tck.yaml.
"""

from __future__ import annotations

import os
from collections.abc import AsyncGenerator

import anyio
from a2a.types import (
    Artifact,
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)

from ranch import Call, Event, reply, text_of

PAUSE = 1.0
"""Seconds a task stays WORKING."""
RESUBSCRIBE_PREFIX = "test-resubscribe-message-id"


def _pause(message: Message) -> float:
    if message.message_id.startswith(RESUBSCRIBE_PREFIX):
        return 2 * float(os.environ.get("TCK_STREAMING_TIMEOUT", "2.0")) + PAUSE
    return PAUSE


async def run(message: Message, call: Call) -> AsyncGenerator[Event, None]:
    """WORKING, a pause, the answer as an artifact, COMPLETED."""
    ids = {"task_id": message.task_id, "context_id": message.context_id}
    yield Task(
        id=message.task_id,
        context_id=message.context_id,
        status=TaskStatus(state=TaskState.TASK_STATE_WORKING),
    )
    await anyio.sleep(_pause(message))
    answer = f"You said: {text_of(message)}"
    artifact = Artifact(artifact_id="answer", name="answer", parts=[Part(text=answer)])
    yield TaskArtifactUpdateEvent(artifact=artifact, **ids)
    done = TaskStatus(state=TaskState.TASK_STATE_COMPLETED, message=reply(message, answer))
    yield TaskStatusUpdateEvent(status=done, **ids)
