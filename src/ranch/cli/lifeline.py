"""A worker of `ranch serve --workers N` ends with its parent, so no orphan keeps serving the port.

uvicorn's supervisor stops its workers when told to (SIGTERM, SIGINT); killed outright (SIGKILL,
the OOM killer) it cannot, and its workers would serve on, holding the port that a restarted
`ranch serve` needs. So each worker has itself sent SIGTERM, which uvicorn takes for a graceful
shutdown (listening sockets closed first, open connections finished, the app's shut-down run),
when its parent ends: on Linux the kernel sends it at once (PR_SET_PDEATHSIG); elsewhere a thread
notices within a second that the worker was re-parented (os.getppid() changed).
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal this process gets when the thread that started it ends."""

POLL_S = 1.0
"""How often a worker without PR_SET_PDEATHSIG looks for its parent."""

log = logging.getLogger(__name__)


def end_with_parent(parent: int, *, poll: float = POLL_S) -> None:
    """SIGTERM this process when `parent` (the pid that started it) ends, or now if it already has."""
    if not _kernel_signals_parent_death():
        watch_parent(parent, poll=poll)
    if os.getppid() != parent:  # it ended before anyone was watching
        _parent_gone(parent)


def watch_parent(parent: int, *, poll: float = POLL_S) -> None:
    """The portable way (macOS, the BSDs): a thread that polls until this process is re-parented."""
    threading.Thread(target=_watch, args=(parent, poll), name="ranch-parent-watch", daemon=True).start()


def _kernel_signals_parent_death() -> bool:
    """Linux: the kernel sends SIGTERM when the parent's starting thread ends (uvicorn starts and
    restarts its workers from its main thread, so that is when the parent ends)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # libc's, already loaded in the process
    except (OSError, AttributeError):
        return False
    return bool(prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) == 0)


def _watch(parent: int, poll: float) -> None:
    while os.getppid() == parent:
        time.sleep(poll)
    _parent_gone(parent)


def _parent_gone(parent: int) -> None:
    log.warning("the parent process %d ended: this worker shuts down, freeing the port", parent)
    os.kill(os.getpid(), signal.SIGTERM)
