"""One gRPC call through the guard chain HTTP requests pass (`edge/guards.py`), then its call context.

The call's metadata stands for the headers: the key from `x-api-key` or `authorization: Bearer`,
`traceparent`, `a2a-extensions`; its `tenant` names the agent as the path does on HTTP; its
encoded size is the body the size limit checks. The chain leaves its decisions in a scope dict,
as on HTTP, and `call_context` builds the A2A context from it, so the request handler cannot
tell which binding a call came in on.
"""

from __future__ import annotations

from typing import Any

import grpc
from a2a.extensions.common import get_requested_extensions
from a2a.server.context import ServerCallContext
from google.protobuf.message import Message

from ranch.edge.context import call_context
from ranch.edge.guards import Call, Entry, Guards
from ranch.exceptions import AgentNotFound, InvalidInput

KEY_METADATA = "x-api-key"
EXTENSIONS_METADATA = "a2a-extensions"


def peer_address(context: grpc.aio.ServicerContext) -> str:
    """The client's address from `context.peer()` (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`)."""
    peer = context.peer() or ""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]") or "unknown"
    if kind == "ipv4":
        return rest.rpartition(":")[0] or "unknown"
    return peer or "unknown"


def metadata_of(context: grpc.aio.ServicerContext) -> list[tuple[str, str]]:
    """The call's metadata, names in lower case, binary values left out."""
    pairs = []
    for name, value in context.invocation_metadata() or ():
        if isinstance(value, str):
            pairs.append((name.lower(), value))
    return pairs


def read_call(
    request: Message, metadata: list[tuple[str, str]], client: str, method: str, root: str | None
) -> Call:
    """What the guard chain reads of a gRPC call: the tenant as its agent, the key, the size."""
    tenant = getattr(request, "tenant", "") or (root or "")
    call = Call("POST", f"/{method}", Entry.A2A, tenant, False, client, length=request.ByteSize())
    bearer = api_key = None
    for name, value in metadata:
        if name == "authorization":
            if value[:7].lower() == "bearer ":
                bearer = value[7:].strip() or None
        elif name == KEY_METADATA:
            api_key = value.strip() or None
        elif name == "traceparent":
            call.traceparent = value
    call.key = bearer or api_key
    return call


async def admit(
    guards: Guards, call: Call, metadata: list[tuple[str, str]], scope: dict[str, Any]
) -> ServerCallContext:
    """Run the chain on `call` (raising the ranch error that refuses it), then build its context."""
    if not call.agent_id:
        raise InvalidInput("tenant is required: the id of the agent or team to call", field="tenant")
    try:
        await guards.check(call, scope)
    except AgentNotFound as exc:  # the same refusal as an unknown id in a path, naming the field
        exc.field = "tenant"  # type: ignore[attr-defined]
        raise
    extensions = get_requested_extensions([value for name, value in metadata if name == EXTENSIONS_METADATA])
    context = call_context(scope, extensions)
    context.tenant = call.agent_id
    return context
