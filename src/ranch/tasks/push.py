"""Push notifications: webhook configs stored next to the tasks, and deliveries of task updates.

- `PushConfigStore` keeps each task's `TaskPushNotificationConfig`s in the table
  `ranch_push_configs` of the task database (the a2a-sdk's PushNotificationConfigStore
  interface), and knows in memory which tasks have any, so the common no-push
  path never touches the database.
- `PushSender` POSTs one update to one webhook through `webhook_client`, whose
  connections the URL guard judges as they are made (policy/egress.py: every
  resolved address checked, the socket opened to a checked one); no redirects
  are followed; the config's token goes in `X-A2A-Notification-Token` (and its
  `authentication` in `Authorization`); transport errors, 408, 429 and 5xx are
  retried with exponential backoff, a bounded number of times; a refused
  address is not retried.
- `PushNotifier` delivers a task's updates in order, one worker per running task,
  in the task group that owns the runs.
- `PushOutbox` holds each update in the database (`push_outbox`) from the moment it is
  queued until it is sent or given up, under the name of the replica sending it: when a
  replica dies, another sends what it was holding, in order (at least once: a webhook may
  see an update twice, as A2A allows).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import anyio
import httpx
import orjson
from a2a.server.context import ServerCallContext
from a2a.server.tasks.push_notification_config_store import (
    PushNotificationConfigStore,
    normalize_push_notification_config,
)
from a2a.types import Message, TaskPushNotificationConfig
from a2a.utils.proto_utils import to_stream_response
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from google.protobuf.json_format import MessageToJson
from google.protobuf.message import Message as Proto
from sqlalchemy import and_, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from ranch.db.models import push_configs, push_outbox
from ranch.db.upsert import insert_for
from ranch.exceptions import InvalidInput
from ranch.fanout import Fanout
from ranch.observe import metrics
from ranch.policy.egress import RefusedConnection, guarded_client
from ranch.policy.ssrf import UrlGuard
from ranch.utils.backoff import Backoff, retry_after

__all__ = ["Backoff", "PushConfigStore", "PushNotifier", "PushOutbox", "PushSender", "webhook_client"]

logger = logging.getLogger(__name__)

TOKEN_HEADER = "X-A2A-Notification-Token"
MAX_CONFIGS_PER_TASK = 10
MAX_TOKEN_LENGTH = 1024
QUEUED_UPDATES = 256
"""Updates waiting per task; beyond this, updates are dropped (and logged) rather than held forever."""
HOLD_WAIT = 10.0
"""Seconds a task's end waits for its updates to be held in the outbox (`PushNotifier.held`) before
it is told anyway: a slow database delays the answer, never hangs it."""

OwnerResolver = Callable[[ServerCallContext], str]


CONTROL = "tasks.control"
"""The fan-out topic on which a replica asks the one running a task to cancel or complete it
(`TaskEngine`), and tells the others that a task's push configs changed (here)."""


class PushConfigStore(PushNotificationConfigStore):
    """Webhook configs per task, in SQL, scoped by owner; `has_configs` answers from memory.

    With replicas, a config made or removed on one is told to the others (`fanout`), since the
    task may run on another one, which then reads its configs again."""

    def __init__(
        self, engine: AsyncEngine, owner_resolver: OwnerResolver, fanout: Fanout | None = None
    ) -> None:
        self.engine = engine
        self.owner_of = owner_resolver
        self.fanout = fanout
        self._tasks: set[str] = set()
        self._cache: dict[str, list[TaskPushNotificationConfig]] = {}

    def changed_elsewhere(self, task_id: str) -> None:
        """Another replica changed `task_id`'s configs: read them again before the next update."""
        self._tasks.add(task_id)  # a dispatch that finds none costs one query
        self._cache.pop(task_id, None)

    async def _tell(self, task_id: str) -> None:
        if self.fanout is not None and self.fanout.shared:
            await self.fanout.publish(CONTROL, orjson.dumps({"kind": "push", "task": task_id}))

    async def initialize(self) -> None:
        """Learn which tasks have configs (the table itself is created by the migrations)."""
        async with self.engine.begin() as connection:
            rows = await connection.execute(select(push_configs.c.task_id).distinct())
            self._tasks = {row.task_id for row in rows}

    def has_configs(self, task_id: str) -> bool:
        """Whether any webhook is registered for `task_id` (memory only; cheap on every event)."""
        return task_id in self._tasks

    async def set_info(
        self, task_id: str, notification_config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        config = normalize_push_notification_config(task_id, notification_config)
        existing = await self.get_info_for_dispatch(task_id)
        if len({c.id for c in existing} | {config.id}) > MAX_CONFIGS_PER_TASK:
            raise InvalidInput(f"task {task_id} already has {MAX_CONFIGS_PER_TASK} push configs", "id")
        row = {"task_id": task_id, "id": config.id, "owner": self.owner_of(context)}
        statement = insert_for(self.engine.dialect.name)(push_configs).values(
            **row, body=config.SerializeToString()
        )
        upsert = statement.on_conflict_do_update(
            index_elements=[push_configs.c.task_id, push_configs.c.id],
            set_={"body": statement.excluded.body},
            where=push_configs.c.owner == statement.excluded.owner,
        )
        async with self.engine.begin() as connection:
            await connection.execute(upsert)
        self._tasks.add(task_id)
        self._cache.pop(task_id, None)
        await self._tell(task_id)
        return config

    async def get_info(self, task_id: str, context: ServerCallContext) -> list[TaskPushNotificationConfig]:
        return await self._select(task_id, self.owner_of(context))

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        cached = self._cache.get(task_id)
        if cached is None:
            cached = self._cache[task_id] = await self._select(task_id, None)
        return cached

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        where = [push_configs.c.task_id == task_id, push_configs.c.owner == self.owner_of(context)]
        if config_id is not None:
            where.append(push_configs.c.id == config_id)
        async with self.engine.begin() as connection:
            await connection.execute(delete(push_configs).where(and_(*where)))
        self._cache.pop(task_id, None)
        await self._tell(task_id)
        if not await self._select(task_id, None):
            self._tasks.discard(task_id)

    async def _select(self, task_id: str, owner: str | None) -> list[TaskPushNotificationConfig]:
        query = select(push_configs.c.body).where(push_configs.c.task_id == task_id)
        if owner is not None:
            query = query.where(push_configs.c.owner == owner)
        async with self.engine.connect() as connection:
            rows = await connection.execute(query.order_by(push_configs.c.id))
            return [TaskPushNotificationConfig.FromString(row.body) for row in rows]


def check_config(config: TaskPushNotificationConfig) -> None:
    """Refuse configs ranch will not deliver to, naming the field (the URL is checked by the guard)."""
    if not config.url:
        raise InvalidInput("pushNotificationConfig.url is required", "url")
    if len(config.token) > MAX_TOKEN_LENGTH:
        raise InvalidInput(f"the token is longer than {MAX_TOKEN_LENGTH} characters", "token")


@dataclass(frozen=True)
class Delivery:
    """How one update went to one webhook."""

    ok: bool
    attempts: int
    status: int | None = None
    error: str = ""


RETRIED = frozenset({408, 425, 429})


def webhook_client(guard: UrlGuard, timeout: float = 10.0) -> httpx.AsyncClient:
    """The client deliveries go through: every connection judged by `guard`, no redirects, no proxies."""
    return guarded_client(guard, timeout=timeout)


class PushSender:
    """Delivers updates to webhooks through a `webhook_client`."""

    def __init__(self, client: httpx.AsyncClient, backoff: Backoff | None = None) -> None:
        self.client = client
        self.backoff = backoff or Backoff()

    async def deliver(self, config: TaskPushNotificationConfig, body: bytes) -> Delivery:
        """POST `body` (a StreamResponse as JSON) to the config's URL; never raises for delivery failures."""
        headers = {"Content-Type": "application/json"}
        if config.token:
            headers[TOKEN_HEADER] = config.token
        if config.HasField("authentication") and config.authentication.scheme:
            auth = config.authentication
            headers["Authorization"] = f"{auth.scheme} {auth.credentials}".strip()
        last = Delivery(False, 0)
        for attempt in range(self.backoff.attempts):
            asked: float | None = None
            metrics.push_attempt()
            try:
                response = await self.client.post(config.url, content=body, headers=headers)
            except httpx.ConnectError as exc:
                if isinstance(exc.__cause__, RefusedConnection):
                    return Delivery(False, attempt + 1, error=str(exc))
                last = Delivery(False, attempt + 1, error=f"{type(exc).__name__}: {exc}")
            except httpx.HTTPError as exc:
                last = Delivery(False, attempt + 1, error=f"{type(exc).__name__}: {exc}")
            else:
                status = response.status_code
                if status < 300:
                    return Delivery(True, attempt + 1, status)
                if 300 <= status < 400:
                    where = response.headers.get("location", "?")
                    return Delivery(False, attempt + 1, status, f"redirect to {where} not followed")
                last = Delivery(False, attempt + 1, status, f"HTTP {status}")
                if status not in RETRIED and status < 500:
                    return last
                asked = retry_after(response.headers)
            if attempt + 1 < self.backoff.attempts:
                await anyio.sleep(self.backoff.wait(attempt, asked))
        return last


def payload(event: Proto) -> bytes:
    """What a webhook receives: the update as an A2A StreamResponse, JSON."""
    text: str = MessageToJson(to_stream_response(event), indent=None)
    return text.encode()


class PushOutbox:
    """Updates on their way, in the database, named by the replica sending them."""

    def __init__(self, engine: AsyncEngine, runner: str) -> None:
        self.engine = engine
        self.runner = runner

    async def hold(self, task_id: str, body: bytes) -> int:
        """Keep one update until `release`; its place in the outbox."""
        async with self.engine.begin() as connection:
            result = await connection.execute(
                insert(push_outbox).values(
                    task_id=task_id, runner=self.runner, body=body, created_at=time.time()
                )
            )
        key = result.inserted_primary_key
        assert key is not None
        return int(key[0])

    async def release(self, seq: int) -> None:
        async with self.engine.begin() as connection:
            await connection.execute(delete(push_outbox).where(push_outbox.c.seq == seq))

    async def take_over(self, alive: set[str]) -> list[tuple[int, str, bytes]]:
        """The updates replicas that are gone were holding, now this one's: (seq, task, body) in order.
        When several replicas look at once, each update goes to one of them."""
        async with self.engine.begin() as connection:
            taken = await connection.execute(
                update(push_outbox)
                .where(push_outbox.c.runner.not_in(alive))
                .values(runner=self.runner)
                .returning(push_outbox.c.seq, push_outbox.c.task_id, push_outbox.c.body)
            )
            rows = [(int(row.seq), str(row.task_id), bytes(row.body)) for row in taken]
        return sorted(rows)


Update = tuple[bytes, int | None]
"""An update's body, and its place in the outbox once held there."""


class PushNotifier:
    """Delivers each task's updates to its webhooks, in order, in the background."""

    def __init__(
        self, store: PushConfigStore, sender: PushSender, group: TaskGroup, outbox: PushOutbox | None = None
    ) -> None:
        self.store = store
        self.sender = sender
        self.group = group
        self.outbox = outbox
        self._queues: dict[str, MemoryObjectSendStream[Update]] = {}
        self._unheld: dict[str, int] = {}
        """Per task, updates queued and not yet held in the outbox."""
        self._all_held: dict[str, anyio.Event] = {}
        self._sending: dict[str, anyio.Event] = {}
        """Per task, set when its newest worker has sent everything: a worker started after it (a
        resumed run's, behind the updates taken over from a stopped replica) sends only then."""
        self.deliveries: list[Delivery] = []
        """The most recent deliveries (at most 100), for tests and diagnostics."""

    def wants(self, task_id: str) -> bool:
        return self.store.has_configs(task_id)

    def notify(self, task_id: str, event: Proto) -> None:
        """Queue one update (Task, status or artifact event) for the task's webhooks."""
        if isinstance(event, Message):
            return  # a direct reply has no task; there is nothing to notify about
        self._queue(task_id, (payload(event), None))

    async def held(self, task_id: str) -> None:
        """Wait until every update queued for the task is held in the outbox (at most `HOLD_WAIT` s):
        a task's end is told only once its updates would outlive this replica."""
        if not self._unheld.get(task_id):
            return
        event = self._all_held.setdefault(task_id, anyio.Event())
        with anyio.move_on_after(HOLD_WAIT):
            await event.wait()

    def finish(self, task_id: str) -> None:
        """No more updates for now (the run ended); the worker drains the queue and stops."""
        queue = self._queues.pop(task_id, None)
        if queue is not None:
            queue.close()

    async def take_over(self, alive: set[str]) -> int:
        """Send, in order, the updates replicas that are gone were holding; how many."""
        if self.outbox is None:
            return 0
        rows = await self.outbox.take_over(alive)
        for seq, task_id, body in rows:
            self._queue(task_id, (body, seq))
        for task_id in {task_id for _, task_id, _ in rows}:
            self.finish(task_id)
        if rows:
            logger.warning("push: sending %d update(s) that stopped replicas were holding", len(rows))
        return len(rows)

    def _queue(self, task_id: str, update: Update) -> None:
        queue = self._queues.get(task_id)
        if queue is None:
            queue, receive = anyio.create_memory_object_stream[Update](QUEUED_UPDATES)
            self._queues[task_id] = queue
            before, sent = self._sending.get(task_id), anyio.Event()
            self._sending[task_id] = sent
            self.group.start_soon(self._work, task_id, receive, before, sent)
        try:
            queue.send_nowait(update)
        except anyio.WouldBlock:
            logger.warning("push: task %s has %d updates waiting; dropping one", task_id, QUEUED_UPDATES)
        else:
            self._unheld[task_id] = self._unheld.get(task_id, 0) + 1

    def _was_held(self, task_id: str) -> None:
        left = self._unheld.get(task_id, 1) - 1
        if left > 0:
            self._unheld[task_id] = left
            return
        self._unheld.pop(task_id, None)
        event = self._all_held.pop(task_id, None)
        if event is not None:
            event.set()

    async def _work(
        self,
        task_id: str,
        receive: MemoryObjectReceiveStream[Update],
        before: anyio.Event | None,
        sent: anyio.Event,
    ) -> None:
        """Hold each update in the outbox as it comes, and send them in order behind (behind what an
        earlier worker of the task, `before`, still sends); `sent` once all are."""
        held, ready = anyio.create_memory_object_stream[Update](QUEUED_UPDATES)
        try:
            async with receive, anyio.create_task_group() as group:
                group.start_soon(self._send_held, task_id, ready, before)
                async with held:
                    async for body, seq in receive:
                        try:
                            if seq is None:
                                seq = await self._hold(task_id, body)
                        finally:
                            self._was_held(task_id)
                        await held.send((body, seq))
        finally:
            sent.set()
            if self._sending.get(task_id) is sent:
                del self._sending[task_id]

    async def _send_held(
        self, task_id: str, ready: MemoryObjectReceiveStream[Update], before: anyio.Event | None
    ) -> None:
        if before is not None:
            await before.wait()
        async with ready:
            async for body, seq in ready:
                configs = await self.store.get_info_for_dispatch(task_id)
                async with anyio.create_task_group() as group:
                    for config in configs:
                        group.start_soon(self._deliver, task_id, config, body)
                if seq is not None and self.outbox is not None:
                    with anyio.CancelScope(shield=True):
                        await self._release(seq)

    async def _hold(self, task_id: str, body: bytes) -> int | None:
        if self.outbox is None:
            return None
        try:
            return await self.outbox.hold(task_id, body)
        except Exception:  # the database is busy: send it anyway, held only in memory
            logger.warning("push: could not hold an update of task %s in the outbox", task_id, exc_info=True)
            return None

    async def _release(self, seq: int) -> None:
        assert self.outbox is not None
        try:
            await self.outbox.release(seq)
        except Exception:  # sent; at worst another replica sends it again after this one is gone
            logger.warning("push: could not release outbox entry %d", seq, exc_info=True)

    async def _deliver(self, task_id: str, config: TaskPushNotificationConfig, body: bytes) -> None:
        delivery = await self.sender.deliver(config, body)
        self.deliveries = [*self.deliveries[-99:], delivery]
        if delivery.ok:
            logger.debug("push: task %s delivered to config %s", task_id, config.id)
        else:
            metrics.push_failure()
            logger.warning(
                "push: task %s, config %s: not delivered after %d attempt(s): %s",
                task_id,
                config.id,
                delivery.attempts,
                delivery.error,
            )
