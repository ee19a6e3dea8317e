"""The parts of room messages: A2A parts as rooms keep and show them (docs/api.md, "Parts").

A room message holds the parts it was posted with: text, a file (inline bytes, or a URL the
hub never fetches) or structured data. The database keeps them as A2A JSON
(`google.protobuf.json_format`: `raw` is base64, `mediaType` camelCase); a message of one text
part keeps none, its `text` column is it. Agents receive the parts as they were posted, and
the room history they are shown names each file and data part in a line of text.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

from a2a.types import Part
from google.protobuf.json_format import MessageToDict, ParseDict, ParseError
from pydantic import Field, model_validator

from ranch.policy.fields import Body, Text
from ranch.policy.limits import Limits, check_value_keys, web_url
from ranch.protocol.parts import decoded_size

if TYPE_CHECKING:  # read by attribute; `PostMessage` (and so the client) reads `PartBody` without the tables
    from ranch.db.models import RoomMessage

HISTORY_DATA_CHARS = 200
"""How much of a data part's JSON the room history shows an agent (the part itself is whole)."""

Url = Annotated[str, Field(pattern=r"^https?://")]
"""An http(s) URL (documented so in the API's schema); `check_message` checks the rest."""


class PartBody(Body):
    """One A2A part (the A2A JSON form): exactly one of `text`, `raw`, `url` or `data`.

    The model checks the part's shape; its values (URL, media type, file name, data and metadata)
    are checked by policy/limits.py `check_message`, the one validator of parts on every entry."""

    text: Text | None = None
    raw: str | None = None
    """A file's bytes, base64-encoded (counted against the message limit once decoded)."""
    url: Url | None = None
    """A file the hub stores by reference and never fetches."""
    data: Any = None
    """Structured data: any JSON value."""
    filename: str | None = None
    mediaType: str | None = None  # A2A's JSON name: `type/subtype`, RFC 6838
    metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_content(self) -> PartBody:
        given = [name for name in ("text", "raw", "url", "data") if name in self.model_fields_set]
        if len(given) != 1:
            found = ", ".join(given) or "none"
            raise ValueError(f"a part holds exactly one of text, raw, url or data (found: {found})")
        if self.text is not None and not self.text:
            raise ValueError("text is empty")
        if self.raw is not None:
            try:
                binascii.a2b_base64(self.raw, strict_mode=True)
            except binascii.Error as exc:
                raise ValueError(f"raw is not base64: {exc}") from None
        return self

    def to_part(self) -> Part:
        part = Part()
        try:
            ParseDict(self.model_dump(exclude_unset=True), part)
        except ParseError as exc:  # pragma: no cover - the model's checks come first
            raise ValueError(str(exc)) from exc
        return part


def converted(bodies: Sequence[PartBody], limits: Limits) -> list[Part]:
    """The posted parts as A2A parts; their data and metadata are walked as JSON first (depth, keys),
    naming `parts[i].data` or `parts[i].metadata`: protobuf's converters recurse, and fail too deep."""
    for index, body in enumerate(bodies):
        if body.data is not None:
            check_value_keys(body.data, f"parts[{index}].data", limits)
        if body.metadata is not None:
            check_value_keys(body.metadata, f"parts[{index}].metadata", limits)
    return [body.to_part() for body in bodies]


def stored(parts: Sequence[Part]) -> list[dict[str, Any]] | None:
    """What the database keeps of `parts`: None for one plain text part (the `text` column is it).

    A file URL that is not `http(s)://` (an agent's answer may hold anything) is kept as a note
    instead: callers' parts were refused for it already (`check_message`)."""
    if len(parts) == 1 and parts[0].WhichOneof("content") == "text" and not parts[0].HasField("metadata"):
        return None
    return [_whole_numbers(MessageToDict(_safe(part))) for part in parts]


def _safe(part: Part) -> Part:
    if part.WhichOneof("content") != "url" or web_url(part.url):
        return part
    return Part(text=f"[ranch] a file link that is not http(s) was left out ({part.filename or 'no name'})")


def joined_text(parts: Sequence[Part]) -> str:
    """The text parts, joined by newlines: a message's `text`."""
    return "\n".join(part.text for part in parts if part.WhichOneof("content") == "text")


def as_json(row: RoomMessage) -> list[dict[str, Any]]:
    """The message's parts as the API shows them (every message has at least its text)."""
    if row.parts is not None:
        return list(row.parts)
    return [{"text": row.text}] if row.text else []


def as_parts(row: RoomMessage) -> list[Part]:
    """The message's parts as an agent receives them."""
    if row.parts is None:
        return [Part(text=row.text)] if row.text else []
    return [ParseDict(item, Part()) for item in row.parts]


def described(row: RoomMessage) -> str:
    """The message in one text for the room history an agent is shown: its text, and a line per
    file or data part naming what it holds."""
    if row.parts is None:
        return row.text
    lines = [row.text] if row.text else []
    for item in row.parts:
        if "text" in item:
            continue
        if "data" in item:
            data = json.dumps(item["data"], ensure_ascii=False)
            cut = data if len(data) <= HISTORY_DATA_CHARS else data[:HISTORY_DATA_CHARS] + "..."
            lines.append(f"[data: {cut}]")
        else:
            name = item.get("filename") or item.get("url") or "file"
            media_type = item.get("mediaType") or "application/octet-stream"
            size = f", {decoded_size(item['raw'])} bytes" if "raw" in item else ""
            lines.append(f"[file: {name} ({media_type}{size})]")
    return "\n".join(lines)


def _whole_numbers(value: Any) -> Any:
    """JSON as posted: protobuf keeps every number as a double (42 comes back 42.0); a whole one
    within a double's exact range is an integer again."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    return value
