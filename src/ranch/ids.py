"""Random ids (UUID version 4 strings) without a system call per id.

`uuid.uuid4()` asks the kernel for 16 random bytes every time; under load that
system call was a visible share of a SendMessage (bench/README.md). `new_id` takes its bytes
from a 4 KiB block of `os.urandom`, so ids stay unpredictable (context ids name
conversations) at one system call per 256 ids; a block is formatted at once and ids
are popped from it. A forked child starts a new block.
"""

from __future__ import annotations

import os

_BLOCK = 4096
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}
"""RFC 4122 variant: the first hex digit of the fourth group is 8, 9, a or b."""
_ids: list[str] = []
_hexes: list[str] = []


def _fresh_hexes() -> list[str]:
    """One block of `os.urandom`, as strings of 32 hex digits."""
    text = os.urandom(_BLOCK).hex()
    return [text[start : start + 32] for start in range(0, len(text), 32)]


def new_id() -> str:
    """A random UUID4 string, e.g. '3f2b8c1e-9a4d-4c7e-8b1f-0d2e6a5c7b90'."""
    try:
        return _ids.pop()  # atomic under the GIL: threads never get the same id
    except IndexError:
        _ids.extend(
            f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}" for h in _fresh_hexes()
        )
        return _ids.pop()


def random_hex() -> str:
    """32 random lowercase hex digits, e.g. a W3C trace id."""
    try:
        return _hexes.pop()
    except IndexError:
        _hexes.extend(_fresh_hexes())
        return _hexes.pop()


def _forget_block() -> None:
    _ids.clear()
    _hexes.clear()


os.register_at_fork(after_in_child=_forget_block)
