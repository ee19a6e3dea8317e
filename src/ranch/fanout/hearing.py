"""`hear`: apply what other replicas publish on one topic, for as long as the hub runs.

Every listener of a topic has the same needs: start listening before the hub serves (so nothing
published after start-up is missed), apply each message, and when messages may have been missed
(the stream ended: a dropped connection, a listener that fell behind; or the fan-out failed),
listen again and then catch up from the database (`on_gap`): in that order, so nothing published
between the two is missed. While Redis is down, listening again waits for the fan-out to reconnect.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskStatus

from ranch.fanout.base import Fanout

logger = logging.getLogger(__name__)

LISTEN_AGAIN = 1.0
"""Seconds before listening again when the fan-out failed (Redis restarting)."""


async def hear(
    fanout: Fanout,
    topic: str,
    apply: Callable[[bytes], Awaitable[None]],
    *,
    on_gap: Callable[[], Awaitable[None]] | None = None,
    task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """`apply` each message of `topic` until cancelled; started once it listens (in one process,
    where nothing is published, at once). A fan-out that fails at start fails the start."""
    if not fanout.shared:
        task_status.started()
        return
    started = False
    while True:
        try:
            async with fanout.listen(topic) as messages:
                if started:  # listening again: what was missed meanwhile is read now, not lost
                    await _catch_up(topic, on_gap)
                else:
                    task_status.started()
                    started = True
                async for data in messages:
                    await apply(data)
            logger.warning("may have missed messages of other replicas on %s; catching up", topic)
        except Exception:
            if not started:
                raise  # at start: a hub that cannot hear its replicas does not start
            logger.warning("lost the messages of other replicas on %s; listening again", topic, exc_info=True)
            await anyio.sleep(LISTEN_AGAIN)


async def _catch_up(topic: str, on_gap: Callable[[], Awaitable[None]] | None) -> None:
    if on_gap is None:
        return
    try:
        await on_gap()
    except Exception:  # the database is busy: the next gap, or a restart, tries again
        logger.warning("could not catch up after missing messages on %s", topic, exc_info=True)
