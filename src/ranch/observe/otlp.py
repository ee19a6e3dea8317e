"""OTLP trace export bytes (`ExportTraceServiceRequest`), encoded by hand.

opentelemetry's encoder builds a protobuf object per span, attribute and value: about 22 µs a
span, a third of what a whole SendMessage costs ranch (bench/README, "Tracing"). This writes the
same wire bytes directly, and keeps the bytes of each (key, value) attribute it has seen (most
repeat on every request: the method, the route, the agent), so a span costs a few µs.
`tests/observe/test_otlp.py` proves the bytes decode to exactly what opentelemetry's encoder makes
of the same spans.

Proto3 rules followed: a scalar at its default is left out; a submessage that the reference
encoder always sets (a span's status, a resource, a scope) is written even when empty; so is a
value of the `AnyValue` oneof, empty or not.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

KEPT_ATTRIBUTES = 4096
"""Encoded (key, value) pairs kept for reuse; all are dropped when full (ids make new ones)."""
KEPT_CHARS = 256
"""Only keys and string values this short are kept: the cache stays under a few MB whatever comes."""
MAX_VALUE_CHARS = 1024
"""Longest string attribute value exported; the rest is cut."""
_SCALARS = frozenset({str, bool, int, float})
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_kept: dict[tuple[int, str, type, Any], bytes] = {}
_fixed64 = struct.Struct("<Q").pack
_fixed32 = struct.Struct("<I").pack
_double = struct.Struct("<d").pack

# the flags opentelemetry's encoder sets: the context says whether the parent is remote
HAS_IS_REMOTE = 0x100
IS_REMOTE = 0x200
_TRACE_ID = b"\x0a\x10"  # field 1, 16 bytes
_SPAN_ID = b"\x12\x08"  # field 2, 8 bytes
_PARENT_ID = b"\x22\x08"  # field 4, 8 bytes
_KINDS = {kind: b"\x30" + bytes((kind + 1,)) for kind in range(5)}  # field 6: SpanKind + 1
_EMPTY_STATUS = b"\x7a\x00"  # field 15, an empty Status (the SDK's encoder always sets one)
_FLAGS_LOCAL = b"\x85\x01" + _fixed32(HAS_IS_REMOTE)  # field 16, fixed32
_FLAGS_REMOTE = b"\x85\x01" + _fixed32(HAS_IS_REMOTE | IS_REMOTE)
_END_LOCAL = _EMPTY_STATUS + _FLAGS_LOCAL
_names: dict[str, bytes] = {}
"""Encoded span names (a route, not a path: few of them), dropped all at once when full."""


def varint(value: int) -> bytes:
    if value < 0:
        value &= 0xFFFFFFFFFFFFFFFF  # int64 as protobuf writes it: ten bytes, two's complement
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (string, bytes, submessage); its tag and length from tables."""
    size = len(payload)
    tag = _TAGS[number] if number < 32 else varint(number << 3 | 2)
    return tag + (_LENGTHS[size] if size < _TABLED else varint(size)) + payload


def text(number: int, value: str) -> bytes:
    return field(number, value.encode()) if value else b""


def any_value(value: Any) -> bytes:
    """An `AnyValue` message's body, as opentelemetry's `_encode_value` fills it."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return b"\x10" + (b"\x01" if value else b"\x00")
    if isinstance(value, str):
        if len(value) > MAX_VALUE_CHARS:
            value = value[:MAX_VALUE_CHARS]  # a caller's 1 MB URL path is not 1 MB of span
        return field(1, value.encode())
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            return field(1, str(value).encode())  # past int64 OTLP has no integer for it: its digits
        return b"\x18" + varint(value)
    if isinstance(value, float):
        return b"\x21" + _double(value)
    if isinstance(value, bytes):
        return field(7, value)
    if type(value) in (tuple, list) or isinstance(value, Sequence):  # (the ABC's check is slow)
        return field(5, b"".join(field(1, any_value(item)) for item in value))
    if isinstance(value, Mapping):
        return field(6, b"".join(field(1, key_value(str(key), item)) for key, item in value.items()))
    raise TypeError(f"an attribute of type {type(value).__name__} cannot be exported")


def key_value(key: str, value: Any) -> bytes:
    return text(1, key) + field(2, any_value(value))


def attribute(number: int, key: str, value: Any) -> bytes:
    """Field `number` holding the KeyValue (`key`, `value`); a short scalar's bytes are kept for the
    next span (most repeat on every request), anything else is encoded each time."""
    kind = type(value)
    if len(key) > KEPT_CHARS or (kind is str and len(value) > KEPT_CHARS):
        return field(number, key_value(key, value))
    if kind not in _SCALARS and not (kind is tuple and _short_texts(value)):
        return field(number, key_value(key, value))
    # the field number is in the bytes (a span's 9, an event's 3); the type, since True == 1 == 1.0
    cached = (number, key, kind, value)
    kept = _kept.get(cached)
    if kept is None:
        if len(_kept) >= KEPT_ATTRIBUTES:
            _kept.clear()
        kept = _kept[cached] = field(number, key_value(key, value))
    return kept


def _short_texts(value: tuple[Any, ...]) -> bool:
    """A tuple worth keeping the bytes of: a few short strings (the peers a hop offered), whose
    equality is their type's (unlike (1,) == (True,))."""
    return 0 < len(value) <= 32 and all(type(item) is str and len(item) <= 64 for item in value)


def attributes(number: int, values: Mapping[str, Any] | None) -> bytes:
    """The KeyValues of `values` as field `number`; `attribute`'s rule, its cache read inline (a
    span's attributes are most of its encoding)."""
    if not values:
        return b""
    kept, out = _kept, []
    for key, value in values.items():
        encoded = kept.get((number, key, type(value), value)) if type(value) in _SCALARS else None
        out.append(encoded if encoded is not None else attribute(number, key, value))
    return b"".join(out)


def span(
    trace_id: bytes,
    span_id: int,
    trace_state: str,
    parent_id: int | None,
    parent_remote: bool,
    name: str,
    kind: int,
    start: int,
    end: int,
    values: Mapping[str, Any] | None,
    events: Iterable[tuple[str, int, Mapping[str, Any] | None]] | None,
    status_code: int,
    status_message: str | None,
) -> bytes:
    """One `Span` message (`trace_id`: its 16 bytes); `kind` is opentelemetry's `SpanKind` value
    (the proto's is one more).

    The fixed parts are bytes made once (the ids' tags and lengths, the kind, the flags, an empty
    status), and a span's name is kept like an attribute: a span is mostly joins."""
    named = _names.get(name)
    if named is None:
        named = text(5, name)
        if len(name) <= KEPT_CHARS:
            if len(_names) >= KEPT_ATTRIBUTES:
                _names.clear()
            _names[name] = named
    body = [
        _TRACE_ID,
        trace_id,
        _SPAN_ID,
        span_id.to_bytes(8, "big"),
    ]
    if trace_state:
        body.append(text(3, trace_state))
    if parent_id is not None:
        body += (_PARENT_ID, parent_id.to_bytes(8, "big"))
    body += (named, _KINDS[kind], b"\x39", _fixed64(start), b"\x41", _fixed64(end))
    if values:
        body.append(attributes(9, values))
    for event_name, at, event_values in events or ():
        event = b"\x09" + _fixed64(at) + text(2, event_name) + attributes(3, event_values)
        body.append(field(11, event))
    if status_code or status_message:
        status = text(2, status_message or "") + (b"\x18" + varint(status_code) if status_code else b"")
        body.append(field(15, status))
    else:
        body.append(_EMPTY_STATUS)
    body.append(_FLAGS_REMOTE if parent_remote else _FLAGS_LOCAL)
    return b"".join(body)


def framed(span: bytes) -> bytes:
    """`span` as a `ScopeSpans` holds it: field 2, its length, itself."""
    size = len(span)
    return b"\x12" + (_LENGTHS[size] if size < _TABLED else varint(size)) + span


def unframed(span: bytes) -> bytes:
    """The `Span` message that `framed` (or a `Described`) wrapped."""
    at = 1
    while span[at] & 0x80:
        at += 1
    return span[at + 1 :]


class Described:
    """A request span's name, kind and attributes encoded once, for every span that shares them
    (`framed_span` packs one: its ids and times are all that differ).

    A request's span is then one `struct` pack: its frame, its field tags and these bytes are fixed,
    and protobuf takes fields in any order (name, kind, attributes, status and flags come first
    here, then the ids and times)."""

    __slots__ = ("head", "pack")

    def __init__(self, name: str, kind: int, values: Mapping[str, Any]) -> None:
        fixed = text(5, name) + _KINDS[kind] + attributes(9, values) + _END_LOCAL
        size = len(fixed) + len(_TRACE_ID) + 16 + len(_SPAN_ID) + 8 + 1 + 8 + 1 + 8
        self.head = b"\x12" + varint(size) + fixed + _TRACE_ID
        """The frame (field 2, the span's length), the fixed fields, the trace id's tag."""
        self.pack = struct.Struct(f"<{len(self.head)}s16s2s8sBQBQ").pack


def framed_span(described: Described, trace_hex: str, span_id: int, start: int, end: int) -> bytes:
    """A root span with no events and no status, `framed`: its ids, its times and `described`."""
    return described.pack(
        described.head, bytes.fromhex(trace_hex), _SPAN_ID, span_id.to_bytes(8, "big"), 0x39, start, 0x41, end
    )


def scope(name: str, version: str | None) -> bytes:
    """An `InstrumentationScope` message."""
    return text(1, name) + text(2, version or "")


def request(
    resource: Mapping[str, Any], scopes: Mapping[tuple[str, str | None, str | None], list[bytes]]
) -> bytes:
    """An `ExportTraceServiceRequest` of one resource: `scopes` maps (name, version, schema url) to
    the `framed` spans of that instrumentation scope, in the order they should appear."""
    scope_spans = []
    for (name, version, schema_url), spans in scopes.items():
        body = field(1, scope(name, version)) + b"".join(spans) + text(3, schema_url or "")
        scope_spans.append(field(2, body))
    resource_spans = field(1, attributes(1, resource)) + b"".join(scope_spans)
    return field(1, resource_spans)


_TABLED = 4096
_LENGTHS = [varint(size) for size in range(_TABLED)]
"""The varints of the lengths most spans and values have, made once."""
_TAGS = [varint(number << 3 | 2) for number in range(32)]
"""The tags of length-delimited fields 0-31, made once."""
