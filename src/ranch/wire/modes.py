"""Media types: what a part is, and whether an agent's listed input modes take it.

A2A cards list the media types an agent takes (`defaultInputModes`) and gives
(`defaultOutputModes`). A text part is `text/plain`, a data part `application/json`, and a
file part its `mediaType` (`application/octet-stream` when it names none). A listed mode
takes a part's type when they are the same type (case and parameters aside), when it is
`type/*` of the part's type, or when it is `*/*`. The short names many agents list stand for
what they mean: `text` is `text/plain`, `json` `application/json`, `image` `image/*`, `audio`
`audio/*` and `video` `video/*` (`SHORT_NAMES`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from a2a.types import Part

TEXT = "text/plain"
JSON = "application/json"
OCTETS = "application/octet-stream"
ANY = "*/*"
SHORT_NAMES = {"text": TEXT, "json": JSON, "image": "image/*", "audio": "audio/*", "video": "video/*"}
"""Modes some A2A agents and samples list (`defaultInputModes: ["text"]`), as media types."""


def media_type_of(part: Part) -> str:
    """The media type `part` carries: its content's kind, or the file's own type."""
    content = part.WhichOneof("content")
    if content == "text":
        return TEXT
    if content == "data":
        return JSON
    return _essence(part.media_type) or OCTETS


def takes(listed: str, media_type: str) -> bool:
    """Whether the listed mode `listed` takes a part of type `media_type`."""
    listed, media_type = _essence(listed), _essence(media_type)
    listed = SHORT_NAMES.get(listed, listed)
    if listed in (ANY, media_type):
        return True
    return listed.endswith("/*") and media_type.split("/", 1)[0] == listed[:-2]


def first_refused(parts: Iterable[Part], modes: Sequence[str]) -> tuple[int, str] | None:
    """The index and media type of the first part no listed mode takes; None when all are taken."""
    for index, part in enumerate(parts):
        media_type = media_type_of(part)
        if not any(takes(listed, media_type) for listed in modes):
            return index, media_type
    return None


def shown(parts: Iterable[Part], agent_id: str, modes: Sequence[str]) -> list[Part]:
    """`parts` as an agent taking `modes` is handed them: a part it does not take becomes a text
    note naming it. For what an agent passes on (a team's hop, an agent's message in a room); a
    caller's own message with such a part is refused instead (`first_refused`)."""
    handed: list[Part] = []
    for part in parts:
        media_type = media_type_of(part)
        if (media_type == TEXT and TEXT in modes) or any(takes(listed, media_type) for listed in modes):
            handed.append(part)
        else:
            name = part.filename or part.url or "a part"
            handed.append(
                Part(text=f"[ranch] {name} ({media_type}) is not shown: {agent_id} does not take it")
            )
    return handed


def merged(*lists: Iterable[str]) -> list[str]:
    """The modes of several lists, each once, in the order first seen."""
    return list(dict.fromkeys(mode for modes in lists for mode in modes))


def _essence(media_type: str) -> str:
    return media_type.split(";", 1)[0].strip().casefold()
