"""Call a ranch team from the official a2a-sdk client, streaming each hop as it happens.

    python examples/sdk_client.py                                   # the demo's helpdesk, on `make serve`
    python examples/sdk_client.py http://127.0.0.1:8000/a2a/agents/helpdesk "find papers on cats"

Prints the Task, then per hop the WORKING status naming the agent and an artifact with its reply,
then the final state and the answer.
"""

from __future__ import annotations

import sys
import uuid

import anyio
import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState

HELPDESK = "http://127.0.0.1:8000/a2a/agents/helpdesk"


async def ask(url: str, text: str) -> list[str]:
    """Send `text` to the agent or team at `url`; the lines printed, one per event and the answer."""
    lines: list[str] = []

    def say(line: str) -> None:
        print(line, flush=True)
        lines.append(line)

    async with httpx.AsyncClient(timeout=60) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        message = Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)])
        async for event in client.send_message(SendMessageRequest(message=message)):
            kind = event.WhichOneof("payload")
            if kind == "task":
                say(f"task {event.task.id}: {TaskState.Name(event.task.status.state)}")
            elif kind == "status_update":
                status = event.status_update.status
                words = " ".join(part.text for part in status.message.parts)
                say(f"  {TaskState.Name(status.state)}: {words}")
            elif kind == "artifact_update" and event.artifact_update.last_chunk:
                artifact = event.artifact_update.artifact
                say(f"  {artifact.name}: {' '.join(part.text for part in artifact.parts)}")
            elif kind == "message":  # an agent that answers without a task
                say(" ".join(part.text for part in event.message.parts))
    return lines


if __name__ == "__main__":
    target = sys.argv[1] if len(sys.argv) > 1 else HELPDESK
    question = sys.argv[2] if len(sys.argv) > 2 else "find papers on quantum error correction"
    anyio.run(ask, target, question)
