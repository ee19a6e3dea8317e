"""The team turns a stopped replica was running, resumed here from their checkpoints (routing/durable.py).

The take-over (`TaskEngine.take_over`) hands each task it claimed from a replica that is gone to
`TurnResumer`: a task with a checkpoint, of a team this hub serves, for the owner that wrote it, goes
on here as the same task; any other fails as before.
"""

from __future__ import annotations

from a2a.types import Task

from ranch.agents.base import Call
from ranch.catalog.registry import Registry
from ranch.db.conversations import ConversationStore
from ranch.routing.durable import Checkpoint
from ranch.routing.team import ResumedTurn, Team
from ranch.tasks.engine import TaskEngine


class TurnResumer:
    """Starts a claimed task's turn again from its checkpoint, when it has one (`Resumer`)."""

    def __init__(self, engine: TaskEngine, registry: Registry, store: ConversationStore) -> None:
        self.engine = engine
        self.registry = registry
        self.store = store

    async def __call__(self, task: Task, owner: str) -> bool:
        found = await self.store.checkpoint(task.id)
        if found is None:
            return False
        written_for, team_id, state = found
        team = self.registry.get(team_id) if team_id in self.registry else None
        if written_for != owner or not isinstance(team, Team):
            return False
        checkpoint = Checkpoint.of(task.id, owner, team_id, state)
        call = Call(owner=owner, caller=checkpoint.caller, resumable=True)
        await self.engine.resume(ResumedTurn(team, checkpoint), task, owner, checkpoint.message, call)
        return True
