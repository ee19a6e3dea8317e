"""ListTasks on each task's current state: stored tasks and running ones, in one order.

A running task's row holds the state it was stored with (SUBMITTED, at creation); its
current state lives in memory until it settles. ListTasks must filter and sort on the
current state (the A2A spec), so the store lists every matching task but the running
ones, and `merge` adds the running ones that match, in the same order: status timestamp
descending, then id descending, untimed tasks last.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from a2a.types import ListTasksRequest, ListTasksResponse, Task
from a2a.utils.task import ListTasksCursor

from ranch.tasks.store import decode_cursor, page_response, page_size_of, updated_ns

_UNTIMED = -1
"""Sorts after every timestamp in the descending order."""


def matches(task: Task, params: ListTasksRequest) -> bool:
    """True when `task`, as it is now, passes the request's filters."""
    if params.context_id and task.context_id != params.context_id:
        return False
    if params.status and task.status.state != params.status:
        return False
    if params.HasField("status_timestamp_after"):
        stamp = updated_ns(task)
        if stamp is None or stamp < params.status_timestamp_after.ToNanoseconds():
            return False
    return True


def _key(task: Task) -> tuple[int, str]:
    stamp = updated_ns(task)
    return (_UNTIMED if stamp is None else stamp, task.id)


def _after(task: Task, cursor: ListTasksCursor) -> bool:
    """True when `task` comes after the page that ended at `cursor`."""
    stamp = _UNTIMED if cursor.timestamp_ns is None else cursor.timestamp_ns
    return _key(task) < (stamp, cursor.task_id)


def merge(
    stored: Sequence[Task], total: int, running: Iterable[Task], params: ListTasksRequest
) -> ListTasksResponse:
    """One page from the store's rows (running tasks left out) and the running tasks themselves.

    `stored` is the store's pageSize + 1 rows after the page token; `total` counts every
    stored match. Running tasks are filtered here, so `totalSize` counts them once.
    """
    live = [task for task in running if matches(task, params)]
    later = live
    if params.page_token:
        cursor = decode_cursor(params.page_token)
        later = [task for task in live if _after(task, cursor)]
    rows = sorted([*stored, *later], key=_key, reverse=True)[: page_size_of(params) + 1]
    return page_response(rows, total + len(live), params)
