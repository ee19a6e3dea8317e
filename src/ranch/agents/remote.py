"""`kind: remote`: an A2A agent built with any SDK, reached over HTTP or gRPC (agents/remote_grpc.py).

The card is read from the agent's URL (cached); calls go through the shared
`ClientPool`. When the card declares client routing, the `A2A-Extensions`
header names the extension; otherwise every trace of it is stripped from the
message first, so the agent receives no extension data (SC-003). Transport and
protocol failures become `AgentError`s naming this agent; so does a reply larger
than the pool's `max_reply_bytes`, measured as the events fold in (the pool
already stops reading a single oversized body), and a connection the guard
refused (a tenant's agent whose card names an internal address). Its `headers` go
to the origin of its `url` only: a card sending calls elsewhere is refused (wire/client.py).

Ids: callers pass their own contextId. The agent keeps, per (owner, caller context),
the remote contextId the peer assigned and the remote task that is waiting for
input, so a follow-up message of the same owner continues the same remote task.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar, cast

import anyio
import httpx
from a2a.client import Client, ClientCallContext
from a2a.client.errors import A2AClientError, A2AClientTimeoutError
from a2a.client.service_parameters import with_a2a_extensions
from a2a.types import (
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
)
from a2a.utils.errors import A2AError
from a2a.utils.signing import SignatureVerificationError
from google.protobuf import json_format

from ranch.agents.base import Agent, AgentInfo, Call, Event
from ranch.agents.remote_grpc import grpc_client, grpc_interface, prefers_grpc, same_host
from ranch.db.conversations import ConversationStore
from ranch.exceptions import AgentError, AgentTimeout, AgentUnavailable, InvalidAgentReply, ReplyTooLarge
from ranch.policy.egress import RefusedConnection
from ranch.utils.lru import Lru
from ranch.wire import client_routing, codec
from ranch.wire.client import CardError, ClientPool, ForeignInterface, ResponseTooLarge, Verify
from ranch.wire.events import INTERRUPTED, TERMINAL, ReplyMeter

logger = logging.getLogger(__name__)

E = TypeVar("E", bound=BaseException)
MAX_SESSIONS = 10_000
CANCEL_GRACE = 2.0
"""Seconds ranch spends asking a peer to cancel the task of a hop that was cancelled."""
POLL_INTERVAL = 1.0
"""Seconds between GetTask calls to a peer that does not stream, re-attached to its task."""


@dataclass
class RemoteSession:
    """The peer's own ids for one caller context."""

    context_id: str = ""
    waiting_task_id: str = ""


class RemoteAgent(Agent):
    """A member (or served proxy) whose work happens behind an A2A URL."""

    streams_text = True
    reattaches = True
    resume = "rerun"
    """Only a hop whose peer had not yet named its task runs again: one that had is re-attached to."""

    def __init__(
        self,
        fallback: AgentInfo,
        url: str,
        pool: ClientPool,
        headers: dict[str, str] | None = None,
        card_ttl: float = 300.0,
        verify: Verify | None = None,
        binding: str = "auto",
    ) -> None:
        self.id = fallback.id
        self.url = url.rstrip("/")
        self._fallback = fallback
        self._pool = pool
        self._headers = dict(headers or {})
        self._ttl = card_ttl
        self._verify = verify
        self.binding = binding
        """`auto` (as the card prefers), `http` or `grpc` (`RemoteAgentConfig.binding`)."""
        self._grpc: tuple[AgentCard, Client] | None = None
        """The gRPC client made for the card now cached (a new card, a new client)."""
        self._sessions: Lru[tuple[str, str], RemoteSession] = Lru(MAX_SESSIONS)
        self._state: ConversationStore | None = None
        """Where the sessions are kept when the hub has a database (then it is the truth)."""

    def keep_state(self, store: ConversationStore) -> None:
        self._state = store

    async def card(self) -> AgentCard:
        """The peer's card, fetched with this agent's headers (its credentials), verified if configured."""
        card, _client = await self._card_and_client()  # no call is made: no gRPC channel either
        return card

    async def _resolve(self) -> tuple[AgentCard, Client]:
        """The card and the SDK client built from it (one fetch: a call goes where the checked card says):
        over gRPC when the card prefers it or `binding` says so, else over JSON-RPC or HTTP+JSON."""
        card, client = await self._card_and_client()
        interface = grpc_interface(card) if self.binding != "http" else None
        if self.binding == "grpc" and interface is None:
            raise AgentUnavailable(
                self.id, f"it is configured binding: grpc; its card at {self.url} lists no GRPC"
            )
        if interface is not None and (self.binding == "grpc" or prefers_grpc(card) or client is None):
            return card, await self._grpc_client(card, interface)
        if client is None:
            raise AgentUnavailable(self.id, f"its card at {self.url} lists no interface ranch speaks")
        return card, client

    async def _grpc_client(self, card: AgentCard, interface: AgentInterface) -> Client:
        """The gRPC client for this card: made once per card fetched; its credentials go to its host only."""
        held = self._grpc
        if held is not None and held[0] is card:
            return held[1]
        if self._headers:
            same_host(self.id, self.url, interface.url)
        client = await grpc_client(self.id, card, interface, self._pool.guard, self._pool.read_limit)
        self._grpc = (card, client)
        if held is not None:
            await held[1].close()
        return client

    async def aclose(self) -> None:
        """Close the gRPC channel, if one was opened."""
        held, self._grpc = self._grpc, None
        if held is not None:
            await held[1].close()

    async def _card_and_client(self) -> tuple[AgentCard, Client | None]:
        try:
            return await self._pool.resolve(self.url, self._headers, self._ttl, self._verify)
        except SignatureVerificationError as exc:
            raise AgentUnavailable(
                self.id, f"its agent card at {self.url} has no signature from a trusted key ({exc})"
            ) from exc
        except ForeignInterface as exc:
            raise AgentUnavailable(self.id, str(exc)) from exc
        except CardError as exc:
            raise AgentUnavailable(self.id, f"cannot read its agent card: {exc}") from exc
        except (httpx.HTTPError, A2AError, ValueError) as exc:
            raise AgentUnavailable(self.id, f"cannot read its agent card at {self.url}: {exc}") from exc

    async def info(self) -> AgentInfo:
        """From the live card; from the config while the agent cannot be reached."""
        try:
            card = await self.card()
        except AgentUnavailable as exc:
            logger.warning("%s", exc)
            return self._fallback
        return AgentInfo(
            id=self.id,
            name=card.name or self._fallback.name,
            description=card.description or self._fallback.description,
            skills=list(card.skills) or self._fallback.skills,
            extensions=list(card.capabilities.extensions),
            streaming=card.capabilities.streaming,
            input_modes=list(card.default_input_modes) or self._fallback.input_modes,
            output_modes=list(card.default_output_modes) or self._fallback.output_modes,
        )

    def run(self, message: Message, call: Call) -> AsyncGenerator[Event, None]:
        def send(card: AgentCard, client: Client, session: RemoteSession) -> AsyncGenerator[Event, None]:
            outgoing = self._outgoing(card, message, session)
            context = self._context(card, call)
            stream = client.send_message(SendMessageRequest(message=outgoing), context=context)
            return self._relay(cast(AsyncGenerator[StreamResponse, None], stream), client, context, session)

        return self._in_session(call.owner, message.context_id, send)

    def reattach(self, task_id: str, context_id: str, call: Call) -> AsyncGenerator[Event, None]:
        """The peer's task `task_id` as it is (GetTask), then its events (SubscribeToTask, or GetTask
        every POLL_INTERVAL seconds when the peer does not stream) until it ends or waits."""

        def follow(card: AgentCard, client: Client, session: RemoteSession) -> AsyncGenerator[Event, None]:
            context = self._context(card, call)
            return self._relay(self._followed(card, client, task_id, context), client, context, session)

        return self._in_session(call.owner, context_id, follow)

    async def _in_session(
        self,
        owner: str,
        caller_context: str,
        events: Callable[[AgentCard, Client, RemoteSession], AsyncGenerator[Event, None]],
    ) -> AsyncGenerator[Event, None]:
        """`events` with the peer's ids for this owner's context; they are stored when they changed."""
        card, client = await self._resolve()
        session = await self._session(owner, caller_context)
        began = (session.context_id, session.waiting_task_id)
        try:
            async for event in events(card, client, session):
                yield event
        finally:
            if (session.context_id, session.waiting_task_id) != began:
                with anyio.CancelScope(shield=True):
                    await self._save(owner, caller_context, session)

    async def _followed(
        self, card: AgentCard, client: Client, task_id: str, context: ClientCallContext
    ) -> AsyncGenerator[StreamResponse, None]:
        task = await client.get_task(GetTaskRequest(id=task_id), context=context)
        if card.capabilities.streaming and not _at_rest(task):
            try:
                async for response in client.subscribe(SubscribeToTaskRequest(id=task_id), context=context):
                    yield response
                return
            except (A2AError, A2AClientError):  # it ended meanwhile (a peer refuses to subscribe to it)
                task = await client.get_task(GetTaskRequest(id=task_id), context=context)
        yield StreamResponse(task=task)
        while not _at_rest(task):
            await anyio.sleep(POLL_INTERVAL)
            task = await client.get_task(GetTaskRequest(id=task_id), context=context)
            yield StreamResponse(task=task)

    async def _relay(
        self,
        stream: AsyncGenerator[StreamResponse, None],
        client: Client,
        context: ClientCallContext,
        session: RemoteSession,
    ) -> AsyncGenerator[Event, None]:
        """The peer's events, checked, measured and tracked; a hop cancelled meanwhile cancels the
        peer's task too."""
        in_flight = ""
        meter = ReplyMeter(self._pool.max_reply_bytes)
        # The SDK's stream is left to the event loop's async-generator finaliser once the answer is
        # in: closing it here waits on the peer's end of the stream (bench/README.md, figures moved).
        with self._translate_errors():
            try:
                async for response in stream:
                    event = _unwrap(self.id, response)
                    _null_non_finite(self.id, event)
                    if not meter.add(event):
                        raise ReplyTooLarge(self.id, meter.limit)
                    _track(session, event)
                    in_flight = _running_task(event, in_flight)
                    yield event
            except anyio.get_cancelled_exc_class():
                if in_flight:  # the hop was cancelled (CancelTask, timeout): stop the peer's task as well
                    await self._cancel_remote(client, in_flight, context)
                raise

    @staticmethod
    def _outgoing(card: AgentCard, message: Message, session: RemoteSession) -> Message:
        """The message in the peer's own ids, stripped of routing data it did not declare."""
        outgoing = Message()
        outgoing.CopyFrom(message)
        outgoing.context_id = session.context_id
        outgoing.task_id = session.waiting_task_id
        if client_routing.URI not in {ext.uri for ext in card.capabilities.extensions}:
            client_routing.strip(outgoing)
        return outgoing

    def _context(self, card: AgentCard, call: Call) -> ClientCallContext:
        """The call's headers: the agent's own, and the extensions both sides know."""
        declared = {ext.uri for ext in card.capabilities.extensions}
        parameters = dict(self._headers)
        with_a2a_extensions(sorted(declared & (call.extensions | {client_routing.URI})))(parameters)
        return ClientCallContext(service_parameters=parameters, timeout=self.timeout)

    @contextmanager
    def _translate_errors(self) -> Iterator[None]:
        """Transport and protocol failures become AgentErrors naming this agent."""
        try:
            yield
        except (httpx.TimeoutException, A2AClientTimeoutError) as exc:
            raise AgentTimeout(self.id, self.timeout) from exc
        except httpx.HTTPStatusError as exc:
            raise AgentUnavailable(self.id, f"HTTP {exc.response.status_code} from {self.url}") from exc
        except httpx.TransportError as exc:
            self._oversized_or_refused(exc)
            self._pool.forget(self.url)
            raise AgentUnavailable(self.id, f"cannot reach {self.url}: {exc!r}") from exc
        except A2AClientError as exc:
            self._oversized_or_refused(exc)
            if "gRPC Error RESOURCE_EXHAUSTED" in str(exc):  # the channel refused a message past the limit
                raise ReplyTooLarge(self.id, self._pool.max_reply_bytes) from exc
            if isinstance(exc.__cause__, ValueError) or "JSON" in str(exc):
                raise InvalidAgentReply(
                    self.id, f"answered with something that is not valid A2A: {exc}"
                ) from exc
            raise AgentUnavailable(self.id, str(exc)) from exc
        except A2AError as exc:
            raise AgentError(self.id, f"answered with an A2A error: {exc}") from exc
        except (ValueError, KeyError, TypeError, json_format.Error) as exc:
            raise InvalidAgentReply(self.id, f"answered with something that is not valid A2A: {exc}") from exc

    def _oversized_or_refused(self, exc: Exception) -> None:
        """Raise the precise error when the pool stopped reading an oversized body, or the guard
        refused the address a call would have gone to (the SDK wraps both)."""
        if _cause(exc, ResponseTooLarge) is not None:
            raise ReplyTooLarge(self.id, self._pool.max_reply_bytes) from exc
        refused = _cause(exc, RefusedConnection)
        if refused is not None:
            raise AgentUnavailable(self.id, f"{refused}; an organization's agents may not call it") from exc

    async def _cancel_remote(self, client: Client, task_id: str, context: ClientCallContext) -> None:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_GRACE):
            try:
                await client.cancel_task(CancelTaskRequest(id=task_id), context=context)
            except (httpx.HTTPError, A2AError, A2AClientError) as exc:
                logger.warning("agent %s: could not cancel its task %s: %s", self.id, task_id, exc)

    async def _session(self, owner: str, caller_context: str) -> RemoteSession:
        """The peer's ids for one owner's context: another owner's same contextId is another session.
        With a database, read there when this process does not hold it (the previous call may have
        run before a restart), and always with replicas (it may have run on another)."""
        if not caller_context:
            return RemoteSession()
        key = (owner, caller_context)
        session = self._sessions.pop(key)
        if self._state is not None and (session is None or self._state.shared):
            stored = await self._state.session(self.id, owner, caller_context)
            session = RemoteSession(*stored) if stored is not None else RemoteSession()
        session = session or RemoteSession()
        self._sessions.put(key, session)
        return session

    async def _save(self, owner: str, caller_context: str, session: RemoteSession) -> None:
        if self._state is None or not caller_context:
            return
        try:
            await self._state.save_session(
                self.id, owner, caller_context, session.context_id, session.waiting_task_id
            )
        except Exception:  # the answer is in; the next call starts a new task with the peer
            logger.warning("agent %s: could not store its session", self.id, exc_info=True)


def _cause(exc: BaseException, kind: type[E]) -> E | None:
    """The first `kind` in the chain of causes behind `exc` (the SDK wraps transport errors)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _track(session: RemoteSession, event: Event) -> None:
    """Remember the peer's context id, and its task while that task waits for input."""
    if event.context_id:
        session.context_id = event.context_id
    if isinstance(event, Message):
        session.waiting_task_id = ""
        return
    if isinstance(event, TaskArtifactUpdateEvent):
        return
    task_id = event.id if isinstance(event, Task) else event.task_id
    session.waiting_task_id = task_id if event.status.state in INTERRUPTED else ""


def _running_task(event: Event, current: str) -> str:
    """The peer's task id while that task runs; "" once it ended or waits for input."""
    if isinstance(event, Message):
        return ""
    if isinstance(event, TaskArtifactUpdateEvent):
        return current
    task_id = event.id if isinstance(event, Task) else event.task_id
    ended = event.status.state in INTERRUPTED or event.status.state in TERMINAL
    return "" if ended else task_id


def _at_rest(task: Task) -> bool:
    """The peer's task ended or waits for input: nothing more comes until a message."""
    return task.status.state in TERMINAL or task.status.state in INTERRUPTED


def _null_non_finite(agent: str, event: Event) -> None:
    """A peer's NaN and Infinity (its JSON may hold them; JSON written out cannot) read as null, so
    its answer can be passed on, stored and shown: the turn goes on, and the log names the agent."""
    changed = codec.null_non_finite(event)
    if changed:
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        logger.warning("agent %s answered NaN or Infinity, read as null, at %s", agent, shown)


def _unwrap(agent: str, response: StreamResponse) -> Event:
    kind = response.WhichOneof("payload")
    if kind == "message":
        return response.message
    if kind == "task":
        return response.task
    if kind == "status_update":
        return response.status_update
    if kind == "artifact_update":
        return response.artifact_update
    raise InvalidAgentReply(agent, "sent a stream event with no payload")
