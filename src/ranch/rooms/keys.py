"""API keys: only a SHA-256 digest is stored, so a leaked database leaks no key."""

from __future__ import annotations

import hashlib


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()
