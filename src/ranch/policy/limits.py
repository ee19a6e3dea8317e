"""Input limits, one function per entry point: every binding calls `check_message` on what it accepts.

The rules (docs/errors.md, "Limits"):

- A text part holds at least one character: `{"text": ""}` is refused, naming
  `message.parts[i].text`, as a message with no parts is.
- A message's content is its protobuf encoding (parts, metadata, ids); over
  `max_message_bytes` (100 KB by default) it is refused with `PayloadTooLarge`
  (JSON-RPC -32602, HTTP 413), and the message names the limit.
- Control characters: text (parts, ids, metadata keys) may hold any Unicode
  except the C0 controls other than TAB, LF and CR, DEL, and the C1 controls
  (U+0000-U+0008, U+000B, U+000C, U+000E-U+001F, U+007F-U+009F). A message
  holding one is refused, never silently altered; the error names the field
  and the code point.
- Metadata (message, part and data-part objects) has string keys of 1 to
  `max_key_length` characters under the same control-character rule, and nests at
  most `max_depth` levels.
- Ids (messageId, contextId, taskId, referenceTaskIds) are at most `max_id_length`
  characters under the same rule.
- A message holds at most `max_parts` parts (64).
- A part's `mediaType` is `type/subtype` of RFC 6838 names, optionally with `; name=value`
  parameters (RFC 9110), and a file's `filename` at most `MAX_FILENAME` characters.
- A file part's URL is `http://` or `https://` (the scheme in any case, RFC 3986) with a host, at
  most `max_url_length` characters, without whitespace or control characters (a URL is never shown
  or sent with a line break). `web_url` is the one scheme check: what a caller may send and what a
  room stores of an agent's answer never differ.
- Where ranch itself converts a caller's JSON parts to protobuf (REST), `check_value_keys` walks
  their data and metadata first: protobuf's converters recurse, and too deep fails there.
- A JSON body or frame is UTF-8 and nests at most `MAX_JSON_DEPTH` levels (`load_json`,
  `check_json`), so no parser down the line meets input that makes it recurse too deep.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import orjson
from a2a.types import Message
from google.protobuf.struct_pb2 import ListValue, Struct, Value

from ranch.exceptions import InvalidInput, PayloadTooLarge

DEFAULT_MAX_MESSAGE_BYTES = 100_000
MAX_INT = 2**63 - 1
"""The largest integer a cursor or count may be: they are signed 64-bit in the database."""
MAX_JSON_DEPTH = 100
"""Deepest nesting of objects and arrays in a JSON body or frame (protobuf's JSON parser stops at
100 too); deeper input would make Python's recursive JSON parsers raise RecursionError."""

CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
"""The characters text may not hold: C0 controls except TAB, LF and CR; DEL; C1 controls."""
MAX_FILENAME = 255
"""Longest file name of a part, in characters."""
_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_TOKEN = r"[A-Za-z0-9!#$%&'*+.^_`|~-]+"
_QUOTED = r'"(?:[\t !#-\[\]-~]|\\[\t -~])*"'
MEDIA_TYPE = re.compile(rf"{_NAME}/{_NAME}(?:[ \t]*;[ \t]*{_TOKEN}=(?:{_TOKEN}|{_QUOTED}))*")
"""A part's media type (`fullmatch`): RFC 6838 names, `type/subtype`, with optional parameters."""
URL_REFUSED = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
"""What a URL may not hold: whitespace (a line break included) or a control character."""


@dataclass(frozen=True)
class Limits:
    """Limits on what a caller may send; the hub's `Settings` fill these."""

    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    """Largest message (its protobuf encoding: parts, metadata and ids), in bytes."""
    max_id_length: int = 256
    """Longest messageId, contextId or taskId, in characters."""
    max_key_length: int = 256
    """Longest metadata key, in characters."""
    max_depth: int = 32
    """Deepest nesting of metadata and data-part objects and lists."""
    max_url_length: int = 2048
    """Longest URL of a file part, in characters."""
    max_parts: int = 64
    """Most parts one message holds."""


def check_message(message: Message, limits: Limits, field: str = "message") -> bool:
    """Refuse a message over the size limit, a part with no content or an empty text, control
    characters, bad ids or bad metadata keys. True when it holds a part besides text (a file or
    data), which the receiving agent's input modes must then take.

    It runs on every message a hub accepts: field names are formatted only for an error, and each
    part is read once (a protobuf field read costs about as much as a line of Python here).
    """
    size = message.ByteSize()
    if size > limits.max_message_bytes:
        raise PayloadTooLarge(size, limits.max_message_bytes, field or "parts")
    prefix = f"{field}." if field else ""  # "": the fields of a body holding `parts` itself
    parts = message.parts
    if len(parts) > limits.max_parts:
        raise InvalidInput(
            f"{prefix}parts holds {len(parts)} parts; at most {limits.max_parts} are allowed",
            f"{prefix}parts",
        )
    longest, search = limits.max_id_length, CONTROL.search
    for name, value in (
        ("messageId", message.message_id),
        ("contextId", message.context_id),
        ("taskId", message.task_id),
    ):
        if len(value) > longest or search(value) is not None:
            check_id(value, f"{prefix}{name}", limits)
    if message.reference_task_ids:
        for index, value in enumerate(message.reference_task_ids):
            check_id(value, f"{prefix}referenceTaskIds[{index}]", limits)
    media = False
    for index, part in enumerate(parts):
        content = part.WhichOneof("content")
        if content == "text":
            text = part.text
            if not text:  # a part with nothing in it, refused as a message with no parts is
                raise InvalidInput(f"{prefix}parts[{index}].text is empty", f"{prefix}parts[{index}].text")
            if search(text) is not None:
                check_text(text, f"{prefix}parts[{index}].text")
        else:
            media = True
            _check_media(part, content, f"{prefix}parts[{index}]", limits)
        if part.media_type:
            check_media_type(part.media_type, f"{prefix}parts[{index}].mediaType")
        if part.HasField("metadata"):
            check_value_keys(part.metadata, f"{prefix}parts[{index}].metadata", limits)
    if message.HasField("metadata"):
        check_value_keys(message.metadata, f"{prefix}metadata", limits)
    return media


def check_text(text: str, field: str) -> None:
    """Refuse text with a control character (see the module's rule); the error names the code point."""
    found = CONTROL.search(text)
    if found is not None:
        raise InvalidInput(
            f"{field} contains the control character U+{ord(found.group()):04X} at index {found.start()}; "
            "only TAB, LF and CR are allowed",
            field,
        )


def check_media_type(media_type: str, field: str) -> None:
    """Refuse a media type that is not `type/subtype` (RFC 6838), with optional parameters."""
    if MEDIA_TYPE.fullmatch(media_type) is None:
        shown = media_type[:80].encode("unicode_escape").decode()
        raise InvalidInput(
            f"{field} must be a media type such as text/plain or image/png (got '{shown}')", field
        )


def _check_media(part: Any, content: str | None, field: str, limits: Limits) -> None:
    """A part besides text: data with good keys, an http(s) URL, raw bytes; not nothing."""
    if part.filename:
        check_filename(part.filename, f"{field}.filename")
    if content == "data":
        check_value_keys(part.data, f"{field}.data", limits)
    elif content == "url":
        check_file_url(part.url, f"{field}.url", limits)
    elif content is None:
        raise InvalidInput(f"{field} has no content (text, raw, url or data)", field)


def check_filename(filename: str, field: str) -> None:
    if len(filename) > MAX_FILENAME:
        raise InvalidInput(f"{field} is {len(filename)} characters; the limit is {MAX_FILENAME}", field)
    check_text(filename, field)


def check_file_url(url: str, field: str, limits: Limits) -> None:
    """A file part's URL is an `http(s)://` URL with a host, of at most `max_url_length` characters,
    without whitespace or control characters: other schemes (`javascript:`, `file:`) are refused,
    never stored or shown."""
    if len(url) > limits.max_url_length:
        raise InvalidInput(f"{field} is {len(url)} characters; the limit is {limits.max_url_length}", field)
    refused = URL_REFUSED.search(url)
    if refused is not None:
        raise InvalidInput(
            f"{field} contains U+{ord(refused.group()):04X} at index {refused.start()}; "
            "a URL holds no whitespace or control characters",
            field,
        )
    if not web_url(url):
        raise InvalidInput(f"{field} must be an http:// or https:// URL", field)
    try:
        parsed = urlsplit(url)
        parsed.port  # noqa: B018 - reading it checks it: a port that is not a number raises
    except ValueError as exc:
        raise InvalidInput(f"{field} is not a valid URL: {exc}", field) from None
    if not parsed.hostname:
        raise InvalidInput(f"{field} names no host", field)


def web_url(url: str) -> bool:
    """Whether `url` is `http://` or `https://`: the only links a message may hold. The scheme in
    any case (`HTTPS://`): RFC 3986 makes it case-insensitive, as browsers and httpx read it."""
    return url[:8].lower().startswith(("http://", "https://"))


def check_id(value: str, field: str, limits: Limits) -> None:
    if len(value) > limits.max_id_length:
        raise InvalidInput(f"{field} is {len(value)} characters; the limit is {limits.max_id_length}", field)
    check_text(value, field)


def check_value_keys(value: Any, field: str, limits: Limits, depth: int = 0, root: str = "") -> None:
    """Walk a protobuf Struct / Value / ListValue or plain JSON data: keys are strings, within the limits.

    Every object and list is a level, an empty one too, the outermost included: at most `max_depth`
    (the same count for JSON and protobuf, so every entry refuses the same input). Too deep is told
    naming the field the walk began at (`parts[0].data`), and where it was in the message."""
    root = root or field
    if isinstance(value, Value):
        kind = value.WhichOneof("kind")
        if kind == "struct_value":
            check_value_keys(value.struct_value, field, limits, depth, root)
        elif kind == "list_value":
            check_value_keys(value.list_value, field, limits, depth, root)
        return
    mapping = value.fields if isinstance(value, Struct) else value if isinstance(value, Mapping) else None
    items = value.values if isinstance(value, ListValue) else None
    if isinstance(value, list | tuple):
        items = value
    if mapping is None and items is None:
        return  # a scalar: no level of its own
    if depth >= limits.max_depth:
        raise InvalidInput(f"{root} nests deeper than {limits.max_depth} levels (at {field})", root)
    if mapping is not None:
        _check_mapping(mapping, field, limits, depth, root)
    else:
        for index, item in enumerate(items or ()):
            check_value_keys(item, f"{field}[{index}]", limits, depth + 1, root)


def _check_mapping(mapping: Mapping[Any, Any], field: str, limits: Limits, depth: int, root: str) -> None:
    for key, item in mapping.items():
        if not isinstance(key, str):
            raise InvalidInput(f"{field} has a key of type {type(key).__name__}; keys must be strings", field)
        if not key or len(key) > limits.max_key_length:
            raise InvalidInput(
                f"{field} has a key of {len(key)} characters; keys have 1 to {limits.max_key_length}", field
            )
        check_text(key, f"{field} key {key[:40]!r}")
        check_value_keys(item, f"{field}.{key}", limits, depth + 1, root)


class JsonTooDeep(ValueError):
    """A JSON document nesting deeper than `MAX_JSON_DEPTH` levels."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"it nests deeper than {limit} levels")


def load_json(raw: bytes | str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Untrusted JSON, parsed: a ValueError (never a RecursionError) for invalid UTF-8, invalid
    JSON, or nesting deeper than `max_depth`."""
    value = orjson.loads(raw)  # iterative: invalid UTF-8 and depth past 1024 are JSONDecodeErrors
    if _brackets(raw) > max_depth and _deeper_than(value, max_depth):
        raise JsonTooDeep(max_depth)
    return value


def check_json(raw: bytes, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuse (ValueError) a body another parser would choke on or read otherwise: invalid UTF-8, a
    NUL byte or a byte order mark (JSON text is UTF-8 and holds neither; Python's `json.loads` would
    guess UTF-16 or UTF-32 from NULs, and fail inside its codec), or nesting deeper than `max_depth`;
    anything else is left to that parser, which answers it well."""
    raw.decode()
    nul = raw.find(b"\0")
    if nul >= 0:
        raise ValueError(f"it holds a NUL byte (at byte {nul}); JSON text is UTF-8 and never holds one")
    if raw.startswith(b"\xef\xbb\xbf"):
        raise ValueError("it begins with a byte order mark; JSON text is UTF-8 without one")
    if _brackets(raw) > max_depth:
        load_json(raw, max_depth)


def _brackets(raw: bytes | str) -> int:
    """Opening brackets in `raw`: a document with no more than N of them nests at most N deep."""
    if isinstance(raw, bytes):
        return raw.count(b"{") + raw.count(b"[")
    return raw.count("{") + raw.count("[")


def _deeper_than(value: Any, limit: int) -> bool:
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False
