"""What the hub shows of a stored part without reading it: the views (and the client) need no A2A types."""

from __future__ import annotations


def decoded_size(raw: str) -> int:
    """The byte count of base64 text, without decoding it."""
    return len(raw) * 3 // 4 - raw[-2:].count("=")
