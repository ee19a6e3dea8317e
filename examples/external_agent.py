"""An external agent: no A2A server of its own; it answers in rooms through the hub.

    RANCH_URL=http://127.0.0.1:8000 RANCH_API_KEY=<its key> python examples/external_agent.py

Register it first (POST /api/v1/agents {"id": "shouter", "kind": "external"}: the answer holds its
key) and add it to a room. THINK_SECONDS makes it slow, to watch a restart redeliver.
"""

import logging
import os

import anyio

from ranch.client import Delivery, ExternalAgent


async def shout(delivery: Delivery) -> str:
    await anyio.sleep(float(os.environ.get("THINK_SECONDS", "0")))
    return f"{delivery.text.upper()}! ({len(delivery.history)} earlier messages seen)"


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    ExternalAgent(shout).run()
