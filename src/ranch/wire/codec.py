"""JSON <-> protobuf for A2A payloads, with a fast path for the common SendMessage.

`google.protobuf.json_format.ParseDict` takes about 22 us for a one-part message;
building the same protobuf directly takes 2-3 us. `parse` builds it directly when
the request uses only the plain fields most requests use, and hands anything else
(push configs, files, snake_case keys, wrong types) to `ParseDict`, so the result
and the errors are exactly ParseDict's (tests/wire/test_codec.py checks this with
hypothesis). `to_json` is `MessageToDict`, the SDK's own rule for the wire.
"""

from __future__ import annotations

from typing import Any, TypeVar, cast

from a2a.types import Message, Part, Role, SendMessageConfiguration, SendMessageRequest
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from google.protobuf.message import Message as Proto

P = TypeVar("P", bound=Proto)

_ROLES = {
    "ROLE_USER": Role.ROLE_USER,
    "ROLE_AGENT": Role.ROLE_AGENT,
    "ROLE_UNSPECIFIED": Role.ROLE_UNSPECIFIED,
}
_REQUEST_KEYS = frozenset({"message", "configuration", "metadata", "tenant"})
_MESSAGE_KEYS = frozenset(
    {"role", "messageId", "contextId", "taskId", "parts", "metadata", "extensions", "referenceTaskIds"}
)
_PART_KEYS = frozenset({"text", "metadata", "mediaType", "filename"})
_CONFIG_KEYS = frozenset({"acceptedOutputModes", "historyLength", "returnImmediately"})


class ParamsError(ValueError):
    """The params do not describe the method's request; the message says where."""


class _Slow(Exception):
    """Internal: leave this one to ParseDict."""


def parse(params: dict[str, Any], cls: type[P]) -> P:
    """`params` as a `cls` protobuf; unknown fields are ignored, as the SDK's dispatcher does."""
    if cls is SendMessageRequest:
        try:
            return cast(P, _send_message_request(params))
        except _Slow:
            pass
    try:
        return cast(P, ParseDict(params, cls(), ignore_unknown_fields=True))
    except ParseError as exc:
        raise ParamsError(str(exc)) from exc


def to_json(message: Proto) -> dict[str, Any]:
    """The JSON form A2A puts on the wire (camelCase, enums by name, defaults omitted)."""
    data: dict[str, Any] = MessageToDict(message)
    return data


def _send_message_request(params: dict[str, Any]) -> SendMessageRequest:
    if not params.keys() <= _REQUEST_KEYS:
        raise _Slow
    request = SendMessageRequest()
    if "message" in params:
        _message(params["message"], request.message)
    if "configuration" in params:
        _configuration(params["configuration"], request.configuration)
    if "metadata" in params:
        _struct(params["metadata"], request)
    if "tenant" in params:
        request.tenant = _str(params["tenant"])
    return request


def _message(data: Any, message: Message) -> None:
    if not isinstance(data, dict) or not data.keys() <= _MESSAGE_KEYS:
        raise _Slow
    if "role" in data:
        role = data["role"]
        if role not in _ROLES:
            raise _Slow
        message.role = _ROLES[role]
    for key, field in (("messageId", "message_id"), ("contextId", "context_id"), ("taskId", "task_id")):
        if key in data:
            setattr(message, field, _str(data[key]))
    if "parts" in data:
        parts = data["parts"]
        if not isinstance(parts, list):
            raise _Slow
        message.parts.extend(_part(item) for item in parts)
    if "metadata" in data:
        _struct(data["metadata"], message)
    for key, repeated in (
        ("extensions", message.extensions),
        ("referenceTaskIds", message.reference_task_ids),
    ):
        if key in data:
            values = data[key]
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise _Slow
            repeated.extend(values)


def _part(data: Any) -> Part:
    if not isinstance(data, dict) or not data.keys() <= _PART_KEYS or not isinstance(data.get("text"), str):
        raise _Slow
    part = Part(text=data["text"])
    if "mediaType" in data:
        part.media_type = _str(data["mediaType"])
    if "filename" in data:
        part.filename = _str(data["filename"])
    if "metadata" in data:
        _struct(data["metadata"], part)
    return part


def _configuration(data: Any, config: SendMessageConfiguration) -> None:
    if not isinstance(data, dict) or not data.keys() <= _CONFIG_KEYS:
        raise _Slow
    if "acceptedOutputModes" in data:
        modes = data["acceptedOutputModes"]
        if not isinstance(modes, list) or not all(isinstance(m, str) for m in modes):
            raise _Slow
        config.accepted_output_modes.extend(modes)
    if "historyLength" in data:
        length = data["historyLength"]
        if type(length) is not int or not -(2**31) <= length < 2**31:
            raise _Slow
        config.history_length = length
    if "returnImmediately" in data:
        if not isinstance(data["returnImmediately"], bool):
            raise _Slow
        config.return_immediately = data["returnImmediately"]


def _struct(data: Any, owner: Message | Part | SendMessageRequest) -> None:
    if not isinstance(data, dict) or not _plain_json(data):
        raise _Slow
    owner.metadata.update(data)


def _plain_json(value: Any, depth: int = 0) -> bool:
    """JSON a Struct holds as ParseDict would: no floats it would refuse, no deep nesting."""
    if depth > 32:
        return False
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_json(v, depth + 1) for k, v in value.items())
    if isinstance(value, list):
        return all(_plain_json(v, depth + 1) for v in value)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return True
    if isinstance(value, int):
        return abs(value) <= 2**53
    return isinstance(value, float) and value == value and abs(value) != float("inf")


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise _Slow
    return value
