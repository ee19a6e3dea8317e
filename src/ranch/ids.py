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
_block = b""
_offset = _BLOCK


def new_id() -> str:
    """A random UUID4 string, e.g. '3f2b8c1e-9a4d-4c7e-8b1f-0d2e6a5c7b90'."""
    global _block, _offset
    with _lock:
        if _offset + 16 > len(_block):
            _block, _offset = os.urandom(_BLOCK), 0
        raw = bytearray(_block[_offset : _offset + 16])
        _offset += 16
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def _forget_block() -> None:
    global _block, _offset
    _block, _offset = b"", _BLOCK


os.register_at_fork(after_in_child=_forget_block)
