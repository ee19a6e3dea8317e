"""The team turns a stopped replica was running, resumed here from their checkpoints (routing/durable.py).

The take-over (`TaskEngine.take_over`) hands each task it claimed from a replica that is gone to
`TurnResumer`: a task with a checkpoint, of a team this hub serves, for the owner that wrote it, goes
on here as the same task; any other fails as before.

A room execution's turn also needs its room: the delivery it answers is made this replica's first
(still running, so the take-over of the stopped replica's deliveries, which follows, leaves it alone
and the agent's next message in the room waits), then the room's dispatcher runs it
(`Dispatcher.resume`), once the rooms have started (at start-up the tasks are taken over before).
"""

from __future__ import annotations

from dataclasses import dataclass

from a2a.types import Message, Task
from sqlalchemy import update

from ranch.agents.base import Agent, Call
from ranch.catalog.registry import Registry
from ranch.db.conversations import ConversationStore
from ranch.db.models import Delivery, DeliveryStatus
from ranch.rooms.delivery import Dispatcher
from ranch.rooms.executions import room_of
from ranch.routing.durable import Checkpoint
from ranch.routing.team import ResumedTurn, Team
from ranch.tasks.engine import TaskEngine
from ranch.wire import keys


@dataclass
class _RoomTurn:
    task: Task
    agent: Agent
    message: Message
    call: Call
    delivery_id: str


class TurnResumer:
    """Starts a claimed task's turn again from its checkpoint, when it has one (`Resumer`)."""

    def __init__(self, engine: TaskEngine, registry: Registry, store: ConversationStore) -> None:
        self.engine = engine
        self.registry = registry
        self.store = store
        self.rooms: Dispatcher | None = None
        """The rooms' dispatcher, once they started (`rooms_started`)."""
        self._waiting: list[_RoomTurn] = []
        """Room turns taken over before the rooms started."""

    async def __call__(self, task: Task, owner: str) -> bool:
        found = await self.store.checkpoint(task.id)
        if found is None:
            return False
        written_for, team_id, state = found
        team = self.registry.get(team_id) if team_id in self.registry else None
        if written_for != owner or not isinstance(team, Team):
            return False
        checkpoint = Checkpoint.of(task.id, owner, team_id, state)
        checkpoint.restore(task)
        call = Call(owner=owner, caller=checkpoint.caller, resumable=True)
        agent = ResumedTurn(team, checkpoint)
        if room_of(owner) is None:
            await self.engine.resume(agent, task, owner, checkpoint.message, call)
            return True
        delivery_id = await self._claim_delivery(checkpoint)
        if delivery_id is None:
            return False
        turn = _RoomTurn(task, agent, checkpoint.message, call, delivery_id)
        if self.rooms is None:
            self._waiting.append(turn)
            return True
        return await self._room_turn(turn)

    async def rooms_started(self, dispatcher: Dispatcher) -> None:
        """The rooms are up: the room turns taken over before go on now."""
        self.rooms = dispatcher
        waiting, self._waiting = self._waiting, []
        for turn in waiting:
            if not await self._room_turn(turn):
                await self.engine.fail_taken_over(turn.task, turn.call.owner)

    async def _room_turn(self, turn: _RoomTurn) -> bool:
        assert self.rooms is not None
        return await self.rooms.resume(turn.task, turn.agent, turn.message, turn.call, turn.delivery_id)

    async def _claim_delivery(self, checkpoint: Checkpoint) -> str | None:
        """The delivery the turn answers, made this replica's (None when it is not running any more)."""
        posted = checkpoint.message.metadata.fields.get(keys.MESSAGE)
        if posted is None or posted.WhichOneof("kind") != "struct_value":
            return None
        fields = posted.struct_value.fields
        room, seq = fields["room"].string_value, int(fields["cursor"].number_value)
        agent_id = checkpoint.team_id
        claim = (
            update(Delivery)
            .where(
                Delivery.room_id == room,
                Delivery.message_seq == seq,
                Delivery.agent_id == agent_id,
                Delivery.status == DeliveryStatus.RUNNING,
            )
            .values(runner=self.engine.runner)
            .returning(Delivery.id)
        )
        async with self.store.engine.begin() as connection:
            claimed = (await connection.execute(claim)).scalars().first()
        return None if claimed is None else str(claimed)
