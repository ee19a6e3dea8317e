"""Random ids (UUID version 4 strings) without a system call per id.

`uuid.uuid4()` asks the kernel for 16 random bytes every time; under load that
system call was 11 % of a SendMessage (bench/README.md). `new_id` takes its bytes
from a 4 KiB block of `os.urandom`, so ids stay unpredictable (context ids name
conversations) at one system call per 256 ids. A forked child starts a new block.
"""

from __future__ import annotations

import os
import threading

_BLOCK = 4096
_lock = threading.Lock()
_hex = ""
_offset = 2 * _BLOCK
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}
"""RFC 4122 variant: the first hex digit of the fourth group is 8, 9, a or b."""


def random_hex(digits: int = 32) -> str:
    """`digits` random lowercase hex digits (at most 64), e.g. a W3C trace id."""
    global _hex, _offset
    with _lock:
        if _offset + digits > len(_hex):
            _hex, _offset = os.urandom(_BLOCK).hex(), 0
        start = _offset
        _offset += digits
    return _hex[start : start + digits]


def new_id() -> str:
    """A random UUID4 string, e.g. '3f2b8c1e-9a4d-4c7e-8b1f-0d2e6a5c7b90'."""
    h = random_hex(32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


def _forget_block() -> None:
    global _hex, _offset
    _hex, _offset = "", 2 * _BLOCK


os.register_at_fork(after_in_child=_forget_block)
