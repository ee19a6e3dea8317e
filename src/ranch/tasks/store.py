"""ranch's task store: one upsert per save, tasks kept as protobuf bytes.

The a2a-sdk's `DatabaseTaskStore` (an ORM `merge`, i.e. a SELECT then an
INSERT/UPDATE, with every field through `MessageToDict`) took most of the
server's CPU per team turn (bench/README.md, Scale). This store implements the
same `TaskStore` interface with one `INSERT ... ON CONFLICT DO UPDATE` (saves made
at the same time share a transaction: `ranch.db.group_commit`) and the
task's canonical protobuf encoding, plus the columns ListTasks filters and sorts
on. ListTasks reads its page by keyset on an index, and its `totalSize` from each
owner's counts by state (kept by triggers, migration 0016), so a call costs the same
at a million tasks as at ten. tests/tasks/test_store.py runs the same operations
against both stores and compares the answers. SQLite (WAL) by default; PostgreSQL by URL.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

from a2a.server.context import ServerCallContext
from a2a.server.tasks.task_store import TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.task import ListTasksCursor, decode_list_tasks_cursor, encode_list_tasks_cursor
from google.protobuf.timestamp_pb2 import Timestamp
from sqlalchemy import Select, and_, func, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ranch.db.group_commit import CommitGroup, GroupWriter
from ranch.db.models import ranch_task_counts as task_counts
from ranch.db.models import ranch_tasks as tasks
from ranch.db.upsert import insert_for

OwnerResolver = Callable[[ServerCallContext], str]
OWNER_KEY = "ranch.owner"
RUNNER_KEY = "ranch.runner"


def owner_of(context: ServerCallContext) -> str:
    """The SDK stores' owner resolver: who owns a task (the caller's `agent/principal`, or a room)."""
    return str(context.state.get(OWNER_KEY, ""))


def owner_context(owner: str, runner: str | None = None) -> ServerCallContext:
    """The call context the stores read a task's owner (and, saving, its runner) from."""
    state: dict[str, str] = {OWNER_KEY: owner}
    if runner is not None:
        state[RUNNER_KEY] = runner
    return ServerCallContext(state=state)


class SqlTaskStore(TaskStore):
    """Tasks in SQL, scoped by owner: the SDK's TaskStore contract, cheaper per save."""

    def __init__(
        self, engine: AsyncEngine, owner_resolver: OwnerResolver, *, commits: CommitGroup | None = None
    ) -> None:
        self.engine = engine
        self.owner_of = owner_resolver
        self._writer = GroupWriter(engine, _upsert(engine.dialect.name), group=commits)

    async def save(self, task: Task, context: ServerCallContext) -> None:
        row = {
            "id": task.id,
            "owner": self.owner_of(context),
            "context_id": task.context_id,
            "state": TaskState.Name(task.status.state),
            "updated_ns": updated_ns(task),
            "body": task.SerializeToString(),
            "runner": context.state.get(RUNNER_KEY),
        }
        await self._writer.write(row)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        async with self.engine.connect() as connection:
            body = (await connection.execute(get_query(task_id, self.owner_of(context)))).scalar_one_or_none()
        return None if body is None else Task.FromString(body)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        rows, total = await self.page(params, context)
        return page_response(rows, total, params)

    async def page(
        self, params: ListTasksRequest, context: ServerCallContext, exclude: Collection[str] = ()
    ) -> tuple[Sequence[Task], int]:
        """Up to pageSize + 1 stored tasks after the page token, in ListTasks order, and how many match.

        `exclude` leaves out tasks by id: the task core lists its running tasks from memory.
        """
        owner = self.owner_of(context)
        where = list_filters(params, owner, exclude)
        cursor = decode_cursor(params.page_token) if params.page_token else None
        limit = page_size_of(params) + 1
        async with self.engine.connect() as connection:
            rows: list[Any] = []
            for query in page_queries(where, cursor):
                rows += (await connection.execute(query.limit(limit - len(rows)))).all()
                if len(rows) >= limit:
                    break
            total = len(rows)  # a first page that holds every match has counted them
            if cursor is not None or total >= limit:
                total = await _total(connection, params, owner, where, exclude)
        return [Task.FromString(row.body) for row in rows], total

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        statement = tasks.delete().where(and_(tasks.c.id == task_id, tasks.c.owner == self.owner_of(context)))
        async with self.engine.begin() as connection:
            await connection.execute(statement)

    async def owner(self, task_id: str) -> str | None:
        """Who owns `task_id` (None when it is not stored)."""
        async with self.engine.connect() as connection:
            owner = (await connection.execute(select(tasks.c.owner).where(tasks.c.id == task_id))).scalar()
        return None if owner is None else str(owner)

    async def orphaned(self, states: Sequence[str], alive: Collection[str]) -> Sequence[tuple[str, str, str]]:
        """(task id, owner, runner) of every stored task in one of `states` whose runner is not `alive`."""
        async with self.engine.connect() as connection:
            rows = await connection.execute(orphaned_query(states, alive))
            return [(row.id, row.owner, row.runner) for row in rows]

    async def claim(self, task_id: str, runner: str, by: str) -> bool:
        """Take a task over from `runner`: True for the one replica whose claim succeeded."""
        statement = update(tasks).where(tasks.c.id == task_id, tasks.c.runner == runner).values(runner=by)
        async with self.engine.begin() as connection:
            return bool((await connection.execute(statement)).rowcount)


async def _total(
    connection: AsyncConnection,
    params: ListTasksRequest,
    owner: str,
    where: Sequence[Any],
    exclude: Collection[str],
) -> int:
    """`totalSize`: from the owner's counts by state when only the owner and status filter (less the
    stored rows of the tasks left out); else counted on the index of the filter, whose matches are
    one conversation's tasks (`contextId`) or those since a time (`statusTimestampAfter`)."""
    if params.context_id or params.HasField("status_timestamp_after"):
        return int((await connection.execute(count_query(where))).scalar_one())
    state = TaskState.Name(params.status) if params.status else None
    total = int((await connection.execute(counted_query(owner, state))).scalar_one())
    if exclude:
        total -= int((await connection.execute(excluded_query(owner, state, exclude))).scalar_one())
    return max(total, 0)


def _upsert(dialect_name: str) -> Any:
    """The one save statement, built once: its row comes as parameters, so SQLAlchemy's compiled
    cache serves every save (building it per save cost more than the write itself)."""
    statement = insert_for(dialect_name)(tasks)
    changes = {
        key: statement.excluded[key] for key in ("context_id", "state", "updated_ns", "body", "runner")
    }
    # a task id belongs to its first owner: another owner's save never overwrites it
    return statement.on_conflict_do_update(
        index_elements=[tasks.c.id], set_=changes, where=tasks.c.owner == statement.excluded.owner
    )


def updated_ns(task: Task) -> int | None:
    """The status timestamp: what ListTasks sorts and filters on (untimed tasks list last)."""
    if task.status.HasField("timestamp"):
        return int(task.status.timestamp.ToNanoseconds())
    return None


def page_size_of(params: ListTasksRequest) -> int:
    return params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE


INT64 = range(-(2**63), 2**63)
"""What `updated_ns` holds: nanoseconds since 1970 in a signed 64-bit column (1677 to 2262)."""


def after_ns(timestamp: Timestamp) -> int:
    """`statusTimestampAfter` in nanoseconds; a time the column cannot hold is the caller's error."""
    nanoseconds = int(timestamp.ToNanoseconds())
    if nanoseconds not in INT64:
        raise InvalidParamsError(
            "statusTimestampAfter must be between 1677-09-21T00:12:44Z and 2262-04-11T23:47:16Z",
            data={"field": "statusTimestampAfter"},
        )
    return nanoseconds


def decode_cursor(token: str) -> ListTasksCursor:
    try:
        cursor = decode_list_tasks_cursor(token)
    except RecursionError:  # the SDK's json.loads on a token nesting hundreds of levels
        cursor = None
    if cursor is None or (cursor.timestamp_ns is not None and cursor.timestamp_ns not in INT64):
        raise InvalidParamsError(f"Invalid page token: {token[:100]}", data={"field": "pageToken"})
    return cursor


def page_response(rows: Sequence[Task], total: int, params: ListTasksRequest) -> ListTasksResponse:
    """One ListTasks page from up to pageSize + 1 ordered tasks (one more means another page)."""
    page_size = page_size_of(params)
    page = list(rows[:page_size])
    token = None
    if len(rows) > page_size:
        token = encode_list_tasks_cursor(ListTasksCursor(updated_ns(page[-1]), page[-1].id))
    return ListTasksResponse(tasks=page, next_page_token=token, page_size=page_size, total_size=total)


# -- the statements of the reads, by name: tests/db/test_query_plans.py checks each one's plan ----------


def get_query(task_id: str, owner: str) -> Select[bytes]:
    """GetTask: one task by its id (the primary key), if `owner`'s."""
    return select(tasks.c.body).where(tasks.c.id == task_id, tasks.c.owner == owner)


def list_filters(params: ListTasksRequest, owner: str, exclude: Collection[str] = ()) -> list[Any]:
    """What a stored task must match to be listed; each filter is led by an index (owner, then
    context or status, then the status timestamp: migration 0013)."""
    where = [tasks.c.owner == owner]
    if params.context_id:
        where.append(tasks.c.context_id == params.context_id)
    if params.status:
        where.append(tasks.c.state == TaskState.Name(params.status))
    if params.HasField("status_timestamp_after"):
        where.append(tasks.c.updated_ns >= after_ns(params.status_timestamp_after))
    if exclude:
        where.append(tasks.c.id.not_in(list(exclude)))
    return where


def count_query(where: Sequence[Any]) -> Select[int]:
    """`totalSize` (A2A requires it on every page) of a listing by contextId or status time: counted
    on the index that leads `where`, without reading a task's body."""
    return select(func.count()).select_from(tasks).where(*where)


def counted_query(owner: str, state: str | None) -> Select[int]:
    """`totalSize` of the owner's listing, all states or one: the counts the triggers keep
    (migration 0016), at most one row per state, whatever the number of tasks."""
    where = [task_counts.c.owner == owner]
    if state is not None:
        where.append(task_counts.c.state == state)
    return select(func.coalesce(func.sum(task_counts.c.tasks), 0)).where(*where)


def excluded_query(owner: str, state: str | None, exclude: Collection[str]) -> Select[int]:
    """How many of the tasks left out of a listing (the running ones, listed from memory) the counts
    hold: read by primary key, so it costs the work in flight."""
    where = [tasks.c.id.in_(list(exclude)), tasks.c.owner == owner]
    if state is not None:
        where.append(tasks.c.state == state)
    return select(func.count()).select_from(tasks).where(*where)


def page_queries(where: Sequence[Any], cursor: ListTasksCursor | None) -> list[Select[Any]]:
    """The page after `cursor` as keyset reads on an index, in ListTasks order: the timed tasks by
    (timestamp, id) descending, then the untimed ones by id descending. Each read walks the index
    from the cursor on, so a page costs the same however many tasks come before or after it (a
    `CASE` in the ORDER BY, for the untimed ones last, sorted every match on every call)."""
    timed = select(tasks.c.body).where(*where, tasks.c.updated_ns.is_not(None))
    untimed = select(tasks.c.body).where(*where, tasks.c.updated_ns.is_(None))
    if cursor is not None and cursor.timestamp_ns is None:
        reads = [untimed.where(tasks.c.id < cursor.task_id)]
    elif cursor is not None:
        position = tuple_(tasks.c.updated_ns, tasks.c.id) < tuple_(cursor.timestamp_ns, cursor.task_id)
        reads = [timed.where(position), untimed]
    else:
        reads = [timed, untimed]
    # the untimed ones too in the index's own order: PostgreSQL sees no other way to give them by id
    return [read.order_by(tasks.c.updated_ns.desc(), tasks.c.id.desc()) for read in reads]


def orphaned_query(states: Sequence[str], alive: Collection[str]) -> Select[str, str, str]:
    """The take-over loop's read (every half lease): tasks driven by a replica not in `alive`. It
    reads the partial index of driven tasks (`runner IS NOT NULL`), not the table: a finished task
    has no runner, so the cost follows the work in flight, not the tasks stored."""
    return select(tasks.c.id, tasks.c.owner, tasks.c.runner).where(
        tasks.c.runner.is_not(None), tasks.c.runner.not_in(list(alive)), tasks.c.state.in_(states)
    )
