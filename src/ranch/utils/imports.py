"""Modules that take long to import, loaded off the event loop.

Some of ranch's dependencies take about a second to import (the MCP SDK, the openai client) and are
loaded only when first used. Imported by a request's handler, they would hold the event loop that
long: every other request waits, a load balancer's health checks time out and it takes the replica
out of service. `imported` loads such a module in a worker thread; the loop goes on serving.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import anyio.to_thread


async def imported(name: str) -> ModuleType:
    """The module `name`, imported in a worker thread the first time (afterwards a lookup)."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    return await anyio.to_thread.run_sync(importlib.import_module, name)
