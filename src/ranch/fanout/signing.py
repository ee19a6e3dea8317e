"""`Seal`: what a replica writes to Redis is signed, so replicas only act on what replicas wrote.

Anyone who can write to Redis could otherwise speak in any room of any tenant (a `live` frame on
the room topic reaches every watcher) or stop any task. With a cluster secret (`--cluster-secret`,
the same on every replica), each message published on a topic and each entry appended to a log
starts with an HMAC-SHA256 of its channel (or key) and its data; a receiver drops what does not
carry a valid one. The channel is in the MAC, so a genuine frame cannot be replayed elsewhere.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import time

logger = logging.getLogger(__name__)

DIGEST = hashlib.sha256().digest_size
MIN_SECRET = 16
"""Characters a cluster secret has at least."""
WARN_EVERY = 60.0
"""Seconds between warnings while forged messages keep coming."""


class Seal:
    """Signs and checks fan-out messages with the replicas' shared secret; no secret, no signature."""

    def __init__(self, secret: str | None) -> None:
        if secret is not None and len(secret) < MIN_SECRET:
            raise ValueError(f"--cluster-secret: at least {MIN_SECRET} characters, not {len(secret)}")
        self._key = secret.encode() if secret else None
        self.refused = 0
        """Messages dropped because their signature did not match."""
        self._warned = 0.0

    @property
    def signs(self) -> bool:
        return self._key is not None

    def seal(self, channel: str, data: bytes) -> bytes:
        """`data` as it goes to Redis on `channel`: after its signature, when there is a secret."""
        if self._key is None:
            return data
        return self._mac(channel, data) + data

    def open(self, channel: str, sealed: bytes) -> bytes | None:
        """The data of a message read from `channel`; None (counted, logged) when it is not signed
        with the secret."""
        if self._key is None:
            return sealed
        data = sealed[DIGEST:]
        if len(sealed) >= DIGEST and hmac.compare_digest(sealed[:DIGEST], self._mac(channel, data)):
            return data
        self._refuse(channel)
        return None

    def _mac(self, channel: str, data: bytes) -> bytes:
        assert self._key is not None
        signed = hmac.new(self._key, channel.encode(), hashlib.sha256)
        signed.update(b"\0")
        signed.update(data)
        return signed.digest()

    def _refuse(self, channel: str) -> None:
        """Count it; warn at the first, then at most once a minute (never with the message: it is
        whatever someone wrote into Redis)."""
        self.refused += 1
        now = time.monotonic()
        if not self._warned or now - self._warned >= WARN_EVERY:
            self._warned = now
            logger.warning(
                "dropped a message on Redis (%s) that is not signed with this replica's --cluster-secret "
                "(%d so far): a replica with another secret, or someone else writing into Redis",
                channel,
                self.refused,
            )
