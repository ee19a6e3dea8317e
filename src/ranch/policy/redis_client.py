"""How ranch opens a Redis client, and what counts as Redis failing.

Every Redis wrapper (rate limits, sessions, the fan-out) opens its client with `open_redis`, so
timeouts and retries are set here, explicitly, instead of taken from redis-py's defaults (which
change between releases: 8.1 reads for at most 5 s, and retries a failed command 10 times).

When a connection is reset, redis-py does not always raise a `RedisError`: on uvloop it raises
`RuntimeError` ("unable to perform operation on <TCPTransport closed=True>", "readuntil() called
while another coroutine is already waiting"). So a wrapper treats *any* `Exception` of a Redis
call as Redis failing (cancellation is a `BaseException` and goes through), and calls
`forget_connections` so the next call does not get the broken connection back from the pool.
"""

from __future__ import annotations

import logging

import anyio
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT = 2.0
"""Seconds to open a connection to Redis."""
REPLY_TIMEOUT = 5.0
"""Seconds to wait for an answer; a blocking command must block for less (`BLOCK_SLICE`)."""
BLOCK_SLICE = 2.0
"""Longest one blocking command (XREAD BLOCK) may block: well under REPLY_TIMEOUT, so a quiet
log is never taken for a dead connection. Longer waits are several such commands."""
RETRIES = 1
"""A failed command is tried once more, at once, on a fresh connection (a pooled one may have been
reset while idle); more would hold every request while Redis is down, when it must fail open."""
FORGET_TIMEOUT = 1.0
"""Seconds `forget_connections` may take to close the pool's idle connections."""


def open_redis(url: str, *, name: str | None = None, retries: int = RETRIES) -> Redis:
    """A client for `url` with ranch's timeouts and retries (`name` shows in Redis's CLIENT LIST).
    A pub/sub client takes `retries=0`: redis-py would reconnect it silently, and what was published
    meanwhile would be lost without its listeners knowing."""
    return Redis.from_url(
        url,
        client_name=name,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_timeout=REPLY_TIMEOUT,
        socket_keepalive=True,
        retry=Retry(ExponentialBackoff(cap=0.1, base=0.05), retries),
    )


async def forget_connections(client: Redis, failure: Exception) -> None:
    """After `failure` of a call on `client`: when it is not one redis-py handles itself (a
    `RedisError` disconnects its connection), close the pool's idle connections, the broken one
    among them, so the next call connects afresh."""
    if isinstance(failure, RedisError):
        return
    with anyio.move_on_after(FORGET_TIMEOUT, shield=True):
        try:
            await client.connection_pool.disconnect(inuse_connections=False)
        except Exception:  # closing a reset connection may fail too; it is dropped either way
            logger.debug("could not close Redis connections after a failure", exc_info=True)
