"""JSON <-> protobuf for A2A payloads, with a fast path for the common SendMessage.

`google.protobuf.json_format.ParseDict` takes about 22 us for a one-part message;
building the same protobuf directly takes 2-3 us. `parse` builds it directly when
the request uses only the plain fields most requests use, and hands anything else
(push configs, files, snake_case keys, wrong types) to `ParseDict`, so the result
and the errors are exactly ParseDict's (tests/wire/test_codec.py checks this with
hypothesis). `to_json` follows `MessageToDict`, the SDK's own rule for the wire,
by the same field walk without its generic machinery (checked the same way).
"""

from __future__ import annotations

import base64
import math
from typing import Any, TypeVar, cast

from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import InvalidParamsError
from google.protobuf.descriptor import FieldDescriptor
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
    fast = _FAST.get(cls)
    if fast is not None:
        try:
            return cast(P, fast(params))
        except _Slow:
            pass
    try:
        return cast(P, ParseDict(params, cls(), ignore_unknown_fields=True))
    except ParseError as exc:
        raise ParamsError(str(exc)) from exc


NO_STATE = frozenset({"", "UNRECOGNIZED"})
"""Task state filters that mean "no filter" besides the proto's own default (`TASK_STATE_UNSPECIFIED`,
0): empty, and the `UNRECOGNIZED` protobuf-js clients (@a2a-js/sdk) write for an unset enum."""


def check_task_state(value: Any, field: str = "status") -> None:
    """Refuse a task state filter that names no state (protobuf would read it as "no filter"); the
    spellings of the unset state (`NO_STATE`, `TASK_STATE_UNSPECIFIED`) are no filter."""
    if value is None or (isinstance(value, str) and value in NO_STATE):
        return
    if isinstance(value, str) and value in _STATE_NAMES:
        return
    number = int(value) if isinstance(value, str) and value.isdigit() else value
    if isinstance(number, int) and not isinstance(number, bool) and number in _STATE_NUMBERS:
        return
    raise InvalidParamsError(
        message=f"{field}: {value!r} is not a task state; use one of {', '.join(_STATE_NAMES[1:])}",
        data={"field": field},
    )


_STATE_NAMES = list(TaskState.keys())
_STATE_NUMBERS = frozenset(TaskState.values())


def to_json(message: Proto) -> dict[str, Any]:
    """The JSON form A2A puts on the wire: exactly `MessageToDict(message)`, faster (bench/README.md).

    Same rules: fields that are set (`ListFields`), camelCase names, enums by name,
    bytes in base64, int64 as strings, Struct / Value / Timestamp in their JSON forms.
    Anything outside the A2A types (maps, extensions, float fields) goes to MessageToDict.
    """
    try:
        return _message_json(message)
    except _Slow:
        data: dict[str, Any] = MessageToDict(message)
        return data


def _message_json(message: Proto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        convert = _CONVERTERS.get(field)
        if convert is None:
            convert = _CONVERTERS[field] = _converter(field)
        out[field.json_name] = convert(value)
    return out


def _converter(field: FieldDescriptor) -> Any:
    if field.is_extension or (field.message_type is not None and field.message_type.GetOptions().map_entry):
        raise _Slow
    single = _single(field)
    if field.is_repeated:
        return lambda values: [single(v) for v in values]
    return single


def _single(field: FieldDescriptor) -> Any:
    kind = field.cpp_type
    if kind == FieldDescriptor.CPPTYPE_MESSAGE:
        special = _WELL_KNOWN.get(field.message_type.full_name)
        return special if special is not None else _message_json
    if kind == FieldDescriptor.CPPTYPE_ENUM:
        names = {value.number: value.name for value in field.enum_type.values}
        if field.enum_type.full_name == "google.protobuf.NullValue" or field.enum_type.is_closed:
            raise _Slow
        return lambda number: names.get(number, number)
    if field.type == FieldDescriptor.TYPE_BYTES:
        return lambda raw: base64.b64encode(raw).decode("utf-8")
    if kind in (FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64):
        return str
    if kind in (FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE):
        raise _Slow
    return _same


def _same(value: Any) -> Any:
    return value


def _value_json(value: Any) -> Any:
    kind = value.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    if kind == "struct_value":
        return _struct_json(value.struct_value)
    if kind == "list_value":
        return _list_json(value.list_value)
    if kind == "number_value" and not math.isfinite(value.number_value):
        raise _Slow  # MessageToDict refuses it; let it say so
    return getattr(value, kind)


def _struct_json(struct: Any) -> dict[str, Any]:
    return {key: _value_json(item) for key, item in struct.fields.items()}


def _list_json(values: Any) -> list[Any]:
    return [_value_json(item) for item in values.values]


def _timestamp_json(stamp: Any) -> str:
    text: str = stamp.ToJsonString()
    return text


_WELL_KNOWN: dict[str, Any] = {
    "google.protobuf.Struct": _struct_json,
    "google.protobuf.Value": _value_json,
    "google.protobuf.ListValue": _list_json,
    "google.protobuf.Timestamp": _timestamp_json,
}
_CONVERTERS: dict[FieldDescriptor, Any] = {}


def _send_message_request(params: dict[str, Any]) -> SendMessageRequest:
    if not params.keys() <= _REQUEST_KEYS:
        raise _Slow
    request = SendMessageRequest()
    if "message" in params:
        request.message.SetInParent()  # present even when empty, as ParseDict makes it
        _message(params["message"], request.message)
    if "configuration" in params:
        request.configuration.SetInParent()
        _configuration(params["configuration"], request.configuration)
    if "metadata" in params:
        _struct(params["metadata"], request)
    if "tenant" in params:
        request.tenant = _str(params["tenant"])
    return request


def _task_id_request(cls: type[P], keys: frozenset[str]) -> Any:
    """GetTask / CancelTask / SubscribeToTask: an id, and for GetTask a history length."""

    def parse_request(params: dict[str, Any]) -> P:
        if not params.keys() <= keys:
            raise _Slow
        request: Any = cls()
        if "id" in params:
            request.id = _str(params["id"])
        if "tenant" in params:
            request.tenant = _str(params["tenant"])
        if "historyLength" in params:
            length = params["historyLength"]
            if type(length) is not int or not -(2**31) <= length < 2**31:
                raise _Slow
            request.history_length = length
        return cast(P, request)

    return parse_request


def _message(data: Any, message: Message) -> None:
    if not isinstance(data, dict) or not data.keys() <= _MESSAGE_KEYS:
        raise _Slow
    if "role" in data:
        role = data["role"]
        if not isinstance(role, str) or role not in _ROLES:
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
    owner.metadata.SetInParent()
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


_FAST: dict[type[Proto], Any] = {
    SendMessageRequest: _send_message_request,
    GetTaskRequest: _task_id_request(GetTaskRequest, frozenset({"id", "tenant", "historyLength"})),
    CancelTaskRequest: _task_id_request(CancelTaskRequest, frozenset({"id", "tenant"})),
    SubscribeToTaskRequest: _task_id_request(SubscribeToTaskRequest, frozenset({"id", "tenant"})),
}


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise _Slow
    return value


def null_non_finite(message: Proto) -> list[str]:
    """Turn each `NaN` / `Infinity` number in `message`'s Struct and Value fields into null, in place;
    the paths of those changed. Python's JSON reader takes them from a peer, but JSON has no room for
    them, so an answer holding one could never be written out (`to_json`, `MessageToDict` refuse it).
    null is what JavaScript's `JSON.stringify` writes for them."""
    changed: list[str] = []
    _null_in_message(message, "", changed)
    return changed


def _null_in_message(message: Proto, path: str, changed: list[str]) -> None:
    for field, value in message.ListFields():
        if field.cpp_type != FieldDescriptor.CPPTYPE_MESSAGE or field.message_type.GetOptions().map_entry:
            continue  # (no A2A message has a map of messages)
        name = f"{path}.{field.json_name}" if path else field.json_name
        items = list(enumerate(value)) if field.is_repeated else [(None, value)]
        for index, item in items:
            where = name if index is None else f"{name}[{index}]"
            if field.message_type.full_name in _WELL_KNOWN_VALUES:
                _null_in_value(item, where, changed)
            else:
                _null_in_message(item, where, changed)


def _null_in_value(value: Any, path: str, changed: list[str]) -> None:
    """Walk a Struct, ListValue or Value (iteratively: nesting is bounded by protobuf, not by us)."""
    stack = [(value, path)]
    while stack:
        item, where = stack.pop()
        kind = item.DESCRIPTOR.full_name
        if kind == "google.protobuf.Struct":
            stack.extend((child, f"{where}.{key}") for key, child in item.fields.items())
        elif kind == "google.protobuf.ListValue":
            stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item.values))
        elif item.WhichOneof("kind") == "struct_value":
            stack.append((item.struct_value, where))
        elif item.WhichOneof("kind") == "list_value":
            stack.append((item.list_value, where))
        elif item.WhichOneof("kind") == "number_value" and not math.isfinite(item.number_value):
            item.null_value = 0
            changed.append(where)


_WELL_KNOWN_VALUES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)
