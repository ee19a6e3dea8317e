"""Every agent and team at /a2a/agents/{id}: ranch's RequestHandler over the task core.

The a2a-sdk's JSON-RPC and HTTP+JSON dispatchers parse, version-check and
serialise; `RanchRequestHandler` owns execution: it resolves the agent from the
URL, negotiates extensions, and hands the message to `TaskEngine`.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Iterator
from contextlib import contextmanager

from a2a.server.context import ServerCallContext
from a2a.server.request_handlers.request_handler import RequestHandler
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a.utils.task import apply_history_length, validate_history_length, validate_page_size

from ranch.agents.base import Agent, Call, Event, check_input
from ranch.catalog.registry import Registry
from ranch.edge.guards import AGENT_KEY
from ranch.exceptions import ExtensionSupportRequired, RanchError
from ranch.identity.principal import PRINCIPAL_KEY, caller_of, session_caller
from ranch.identity.sessions import SessionStore
from ranch.ids import new_id
from ranch.policy.limits import Limits, check_message
from ranch.policy.ssrf import UrlGuard
from ranch.rooms.executions import owner as room_owner
from ranch.rooms.executions import room_of
from ranch.rooms.gateway import Gateway
from ranch.tasks.engine import TaskEngine
from ranch.tasks.push import PushConfigStore, check_config
from ranch.tasks.store import owner_context
from ranch.wire.codec import check_task_state
from ranch.wire.errors import to_a2a
from ranch.wire.events import ROLE_USER, TERMINAL
from ranch.wire.middleware import SCOPE_KEY

NO_EXTENSIONS: frozenset[str] = frozenset()
ExtendedCard = Callable[[Agent, ServerCallContext], Awaitable[AgentCard]]
"""The card `GetExtendedAgentCard` answers a caller with (catalog/extended.py)."""


def answer_inline(agent: Agent, message: Message, call: Call) -> Message:
    """Agents that always answer with one Message run in the request itself: no task, no run.

    Only ranch's own `rules` and `echo` kinds set `replies_directly`; they compute their
    answer without waiting on anything, so no timeout scope is needed around them.
    """
    message.context_id = message.context_id or new_id()
    answer = agent.reply_now(message, call)
    answer.context_id, answer.task_id = message.context_id, ""
    return answer


class RanchRequestHandler(RequestHandler):
    """The SDK's handler interface, implemented over ranch's task core."""

    def __init__(
        self,
        registry: Registry,
        core: Callable[[], TaskEngine],
        limits: Limits | None = None,
        guard: UrlGuard | None = None,
        gateway: Callable[[], Gateway | None] = lambda: None,
        *,
        sessions: SessionStore | None = None,
        extended_card: ExtendedCard | None = None,
    ) -> None:
        self.registry = registry
        self._extended_card = extended_card
        self.sessions = sessions
        self._core = core
        self.limits = limits or Limits()
        self.guard = guard or UrlGuard()
        self._gateway = gateway

    @property
    def core(self) -> TaskEngine:
        return self._core()

    async def on_message_send(self, params: SendMessageRequest, context: ServerCallContext) -> Task | Message:
        agent, message, call = await self._accept(params, context)
        # a message naming no context or task goes to no room: no coroutine for the common case
        gateway = (
            await self._room_gateway(message, context) if message.context_id or message.task_id else None
        )
        if gateway is not None:
            with translated():
                task = await gateway.send(agent.id, message, self._caller(context), agent.timeout)
            return apply_history_length(task, params.configuration)
        push = await self._inline_push_config(agent, params) if params.HasField("configuration") else None
        if agent.replies_directly and not message.task_id:
            return answer_inline(agent, message, call)
        submit = params.configuration.return_immediately
        with translated():  # a task that cannot be stored is an error, never an unstored answer
            run = await self.core.start(agent, message, call, self._owner(context), push, submit=submit)
            if submit:
                assert run.task is not None  # stored by start() before the agent began
                return apply_history_length(await self.core.get(run.task_id, run.owner), params.configuration)
            await run.done.wait()
            if run.error is not None:
                raise run.error
        if run.reply is not None:
            return run.reply
        assert run.task is not None  # settle() always leaves a task when there was no direct reply
        return apply_history_length(run.task, params.configuration)

    async def on_message_send_stream(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        agent, message, call = await self._accept(params, context)
        gateway = await self._room_gateway(message, context)
        if gateway is not None:
            with translated():
                async for event in gateway.stream(agent.id, message, self._caller(context), agent.timeout):
                    yield event
            return
        push = await self._inline_push_config(agent, params) if params.HasField("configuration") else None
        if agent.replies_directly and not message.task_id:
            yield answer_inline(agent, message, call)
            return
        with translated():  # a task that cannot be stored ends the stream with an error event
            run = await self.core.start(agent, message, call, self._owner(context), push)
            async for event in self.core.stream(run, run.subscribe()):
                yield event

    async def on_get_task(self, params: GetTaskRequest, context: ServerCallContext) -> Task | None:
        validate_history_length(params)
        owner, gateway = await self._task_owner(params.id, context)
        if gateway is not None:  # an execution: the room's history, the execution's account
            limit = params.history_length if params.HasField("history_length") else None
            with translated():
                return await gateway.task(params.id, limit)
        return apply_history_length(await self.core.get(params.id, owner), params)

    async def on_list_tasks(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        validate_history_length(params)
        check_task_state(params.status)
        if params.HasField("page_size"):
            validate_page_size(params.page_size)
        owner, gateway = self._owner(context), None
        if params.context_id:  # a room's executions, for a caller who may use the room
            gateway = await self._usable_room(params.context_id, context)
            if gateway is not None:
                owner = room_owner(params.context_id)
        page = await self.core.list(params, owner)
        for task in page.tasks:  # the same shaping as the SDK's own handler
            if gateway is not None:
                with translated():
                    task.CopyFrom(await gateway.task(task.id, None))
            if not params.include_artifacts:
                task.ClearField("artifacts")
            task.CopyFrom(apply_history_length(task, params))
        return page

    async def on_cancel_task(self, params: CancelTaskRequest, context: ServerCallContext) -> Task | None:
        owner, gateway = await self._task_owner(params.id, context)
        with translated():
            if gateway is not None:
                return await gateway.cancel(params.id, self._caller(context))
            return await self.core.cancel(params.id, owner)

    async def on_subscribe_to_task(
        self, params: SubscribeToTaskRequest, context: ServerCallContext
    ) -> AsyncGenerator[Event]:
        owner, gateway = await self._task_owner(params.id, context)
        watched = self.core.watch(params.id, owner)
        followed = await self.core.follow(params.id, owner) if watched is None else None
        if followed is not None:  # another replica runs it: its log, as it grows
            async for event in followed:
                yield event
            return
        if watched is None:
            task = await self.core.get(params.id, owner)  # TaskNotFound when it is not there
            if task.status.state in TERMINAL:
                raise UnsupportedOperationError(f"task {params.id} has ended; use GetTask to read it")
            yield task if gateway is None else await gateway.task(params.id, None)
            return
        run, receive = watched
        assert run.task is not None
        yield run.task if gateway is None else await gateway.task(params.id, None)
        async for event in self.core.stream(run, receive):
            yield event

    async def on_create_task_push_notification_config(
        self, params: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        try:
            store, owner = await self._push_store(params.task_id, context)
        except TaskNotFoundError:  # an agent that never notifies says so, whatever the task id
            self._refuse_push(self.registry.get(context.state.get(AGENT_KEY, "")))
            raise
        if room_of(owner) is None:  # an execution notifies whatever its agent's kind; a plain task not always
            self._refuse_push(self.registry.get(context.state.get(AGENT_KEY, "")))
        await self._check_push_config(params)
        with translated():
            return await store.set_info(params.task_id, params, owner_context(owner))

    async def on_get_task_push_notification_config(
        self, params: GetTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        store, owner = await self._push_store(params.task_id, context)
        for config in await store.get_info(params.task_id, owner_context(owner)):
            if config.id == (params.id or params.task_id):
                return config
        raise TaskNotFoundError(f"task {params.task_id} has no push notification config '{params.id}'")

    async def on_list_task_push_notification_configs(
        self, params: ListTaskPushNotificationConfigsRequest, context: ServerCallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        store, owner = await self._push_store(params.task_id, context)
        configs = await store.get_info(params.task_id, owner_context(owner))
        return ListTaskPushNotificationConfigsResponse(configs=configs)

    async def on_delete_task_push_notification_config(
        self, params: DeleteTaskPushNotificationConfigRequest, context: ServerCallContext
    ) -> None:
        store, owner = await self._push_store(params.task_id, context)
        await store.delete_info(params.task_id, owner_context(owner), params.id or None)

    async def on_get_extended_agent_card(
        self, params: GetExtendedAgentCardRequest, context: ServerCallContext
    ) -> AgentCard:
        if self._extended_card is None:  # no keys, no caller: the public card is the whole card
            raise ExtendedAgentCardNotConfiguredError()
        return await self._extended_card(self.registry.get(context.state.get(AGENT_KEY, "")), context)

    # -- helpers ------------------------------------------------------------------------------

    async def _push_store(self, task_id: str, context: ServerCallContext) -> tuple[PushConfigStore, str]:
        """The store and the task's owner, once the caller may use `task_id` (else TaskNotFound)."""
        push = self.core.push
        if push is None:
            raise PushNotificationNotSupportedError()
        if not task_id:
            raise InvalidParamsError("taskId is required")
        owner, _gateway = await self._task_owner(task_id, context)
        await self.core.get(task_id, owner)
        return push.store, owner

    async def _check_push_config(self, config: TaskPushNotificationConfig) -> None:
        with translated():
            check_config(config)
            await self.guard.check(config.url)

    async def _inline_push_config(
        self, agent: Agent, params: SendMessageRequest
    ) -> TaskPushNotificationConfig | None:
        """The push config sent with the message (configuration.taskPushNotificationConfig), checked."""
        if not params.configuration.HasField("task_push_notification_config"):
            return None
        self._refuse_push(agent)
        if self.core.push is None:
            raise PushNotificationNotSupportedError()
        config = params.configuration.task_push_notification_config
        await self._check_push_config(config)
        return config

    @staticmethod
    def _refuse_push(agent: Agent) -> None:
        """An agent that answers at once with a Message never has a task to notify about."""
        if agent.replies_directly:
            raise PushNotificationNotSupportedError(
                f"agent '{agent.id}' answers each message at once with a Message and never creates a "
                "task, so it sends no push notifications (its card says pushNotifications: false)"
            )

    async def _accept(
        self, params: SendMessageRequest, context: ServerCallContext
    ) -> tuple[Agent, Message, Call]:
        """Validate the message and negotiate extensions; errors name the field at fault."""
        try:  # one handler for the whole check (a `with translated()` per step costs on every request)
            agent = self.registry.get(context.state.get(AGENT_KEY, ""))
            message = params.message
            if not params.HasField("message"):
                raise InvalidParamsError("params.message is required")
            validate_history_length(params.configuration)
            if not message.message_id:
                raise InvalidParamsError("message.messageId is required")
            if message.role != ROLE_USER:
                raise InvalidParamsError("message.role must be ROLE_USER ('user' in A2A 0.3)")
            if not message.parts:
                raise InvalidParamsError("message.parts must contain at least one part")
            media = check_message(message, self.limits)  # parts with no content too; True: files or data
            if media or not agent.takes_text:
                await check_input(agent, message.parts)
            if context.requested_extensions or agent.require_extensions:
                extensions = await self._negotiate(agent, context)
            else:
                extensions = NO_EXTENSIONS  # the common case, on every message: nothing to await
            principal = context.state.get(PRINCIPAL_KEY)
            caller = caller_of(principal) if principal is not None else None
            call = Call(extensions=extensions, owner=self._owner(context), caller=caller, resumable=True)
            if self.sessions is not None and message.context_id:
                await self.sessions.touch(
                    session_caller(context.state.get(PRINCIPAL_KEY)), message.context_id
                )
        except RanchError as exc:
            raise to_a2a(exc) from exc
        return agent, message, call

    @staticmethod
    async def _negotiate(agent: Agent, context: ServerCallContext) -> frozenset[str]:
        """Activate the requested extensions the agent supports; refuse when a required one is missing."""
        if not context.requested_extensions and not agent.require_extensions:
            return NO_EXTENSIONS  # the common case, on every message
        requested = frozenset(context.requested_extensions)
        if agent.require_extensions:
            missing = [uri for uri in agent.require_extensions if uri not in requested]
            if missing:
                raise to_a2a(ExtensionSupportRequired(agent.id, missing))
        if not requested:
            return NO_EXTENSIONS
        info = await agent.info()
        supported = {ext.uri for ext in info.extensions} | set(agent.require_extensions)
        activated = sorted(requested & supported)
        context.state[SCOPE_KEY]["activated"] = activated
        return frozenset(activated)

    async def _room_gateway(self, message: Message, context: ServerCallContext) -> Gateway | None:
        """The rooms gateway when the message goes into a room the caller may use: its contextId is
        the room, or its taskId one of the room's executions (the room is then its context).

        Another tenant's room is not a room to this caller: its contextId starts a plain task.
        """
        if message.task_id:
            owner, gateway = await self._task_owner(message.task_id, context)
            room = room_of(owner)
            if gateway is None or room is None:
                return None
            if message.context_id and message.context_id != room:
                raise InvalidParamsError(
                    f"message.contextId {message.context_id} does not match task {message.task_id}"
                )
            message.context_id, message.task_id = room, ""
            return gateway
        if not message.context_id:
            return None
        return await self._usable_room(message.context_id, context)

    async def _usable_room(self, room_id: str, context: ServerCallContext) -> Gateway | None:
        """The rooms gateway when `room_id` is a room the caller may use (without a key: the default
        organization's, on a server without auth)."""
        gateway = self._gateway()
        if gateway is None or not gateway.is_room(room_id):
            return None
        return gateway if await gateway.may_use(context.state.get(PRINCIPAL_KEY), room_id) else None

    async def _task_owner(self, task_id: str, context: ServerCallContext) -> tuple[str, Gateway | None]:
        """Whose task `task_id` is, to this caller: its own, or an execution of a room it may use (then
        with the rooms gateway that serves it). Anything else reads as the caller's, and is not found."""
        mine = self._owner(context)
        room = room_of(await self.core.owner_of(task_id) or "")
        if room is not None:
            gateway = await self._usable_room(room, context)
            if gateway is not None:
                return room_owner(room), gateway
        return mine, None

    @staticmethod
    def _caller(context: ServerCallContext) -> str:
        return (
            context.user.user_name
            if context.user.is_authenticated and context.user.user_name
            else "a2a-client"
        )

    def _owner(self, context: ServerCallContext) -> str:
        agent_id = context.state.get(AGENT_KEY, "")
        user = context.user.user_name if context.user.is_authenticated else ""
        return f"{agent_id}/{user}"


@contextmanager
def translated() -> Iterator[None]:
    """A ranch error raised inside the handler leaves it as the A2A error the table gives it."""
    try:
        yield
    except RanchError as exc:
        raise to_a2a(exc) from exc
