"""How a room execution's turns read as task events: the `Lifetime` rooms give the task engine.

An execution is a long-lived task (`tasks.lifetimes`): an agent's normal answer leaves it
INPUT_REQUIRED with `metadata["ranch.execution"].status = "ready"` (waiting for the room's next
message) instead of COMPLETED; the agent ends the execution by marking its reply `ranch.done`.
A child execution (work another agent handed over) ends with its answer instead.
The statuses are executions' own words (`ExecutionStatus`), named here and never in the engine.
"""

from __future__ import annotations

from a2a.types import Task, TaskStatusUpdateEvent

from ranch.agents.fold import state_name
from ranch.db.models import ExecutionStatus
from ranch.tasks.lifetimes import done, mark
from ranch.wire.client_routing import read_handoff
from ranch.wire.events import COMPLETED, INPUT_REQUIRED, INTERRUPTED, TERMINAL, WORKING


class ExecutionTurns:
    """Shapes each turn's events as executions name their statuses."""

    def begin(self, task: Task) -> None:
        mark(task.metadata, ExecutionStatus.WORKING)

    def shape(self, event: Task | TaskStatusUpdateEvent) -> None:
        """A turn's normal end leaves the execution ready, not completed."""
        status = event.status
        if status.state == COMPLETED and not done(event):
            status.state = INPUT_REQUIRED
            mark(event.metadata, ExecutionStatus.READY)
        elif status.state == COMPLETED:
            mark(event.metadata, ExecutionStatus.COMPLETED)
        elif status.state in INTERRUPTED:
            mark(event.metadata, ExecutionStatus.INPUT_REQUIRED)
        elif status.state in TERMINAL:
            mark(event.metadata, state_name(status.state))
        elif status.state == WORKING:
            mark(event.metadata, ExecutionStatus.WORKING)


class ChildTurns(ExecutionTurns):
    """A child execution's turns (a handoff's): its answer is the result of the work handed to it, so
    a normal answer completes it; asking for input, or handing the work on, leaves it open."""

    def shape(self, event: Task | TaskStatusUpdateEvent) -> None:
        if event.status.state == COMPLETED and read_handoff(event) is None:
            mark(event.metadata, ExecutionStatus.COMPLETED)
            return
        super().shape(event)


EXECUTION_TURNS = ExecutionTurns()
CHILD_TURNS = ChildTurns()
