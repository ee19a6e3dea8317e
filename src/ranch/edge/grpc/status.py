"""Errors as gRPC statuses, from the one table (`wire/errors.py`): its `grpc` column is the code,
its reason the `ErrorInfo.reason`, the field at fault in `ErrorInfo.metadata["field"]`."""

from __future__ import annotations

import grpc
from a2a.utils.errors import A2A_ERROR_MAPPING, A2AError
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2

from ranch.wire.errors import code_for, field_of, message_of, retry_after, to_a2a

DOMAIN = "a2a-protocol.org"
STATUS_DETAILS_KEY = "grpc-status-details-bin"


def _row(wire: A2AError) -> tuple[str, str]:
    """The gRPC status name and reason of an error as the bindings carry it (`to_a2a`): the table
    registers each of ranch's rows in the SDK's mapping under its wire class."""
    for cls in type(wire).__mro__:
        mapping = A2A_ERROR_MAPPING.get(cls)
        if mapping is not None:
            return mapping.grpc_status, mapping.reason
    row = code_for(wire)
    return row.grpc, row.reason


def rich_status(
    error: BaseException, *, debug: bool = False
) -> tuple[grpc.StatusCode, str, tuple[tuple[str, bytes | str], ...]]:
    """The status code, message and trailing metadata (google.rpc.Status with an ErrorInfo) of `error`."""
    wire = to_a2a(error, debug=debug)
    grpc_name, reason = _row(wire)
    code = grpc.StatusCode[grpc_name]
    message = message_of(wire, debug=debug)
    info = error_details_pb2.ErrorInfo(reason=reason, domain=DOMAIN)
    field = field_of(wire)
    if field is not None:
        info.metadata["field"] = field
        if field not in message:  # the message names the field, as on the other bindings
            message = f"{field}: {message}"
    wait = retry_after(error)
    if wait is not None:
        info.metadata["retryAfter"] = str(wait)
    detail = any_pb2.Any()
    detail.Pack(info)
    status = status_pb2.Status(code=code.value[0], message=message, details=[detail])
    trailing: list[tuple[str, bytes | str]] = [(STATUS_DETAILS_KEY, status.SerializeToString())]
    if wait is not None:
        trailing.append(("retry-after", str(wait)))
    return code, message, tuple(trailing)
