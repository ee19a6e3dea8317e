"""`/api/v1/replay`: a stored team turn run again on a config the server's operator named at start.

The page never sends a config (a config can name `python` entries and remote URLs): the operator
offers config files by name (`ranch serve --replay-config NAME=PATH`), an organization's owner or
admin lists the names and replays a turn on one. The answer is what `ranch replay --json` prints,
made by the same code (ranch.replay). In a recorded replay the members that count as changed are
those whose entries differ from the served config's, the one the turn was recorded on.
"""

from __future__ import annotations

from typing import Any, Literal

import anyio
from google.protobuf.json_format import MessageToDict
from pydantic import BaseModel
from sqlalchemy import select

from ranch.api.operations import Call
from ranch.db.models import AgentRecord, User
from ranch.exceptions import NotFound, Unprocessable
from ranch.policy.fields import Body, Ref
from ranch.replay import changes, player, sources
from ranch.replay.recording import RecordedTurn, ReplayInputError, turn_from_execution, turn_from_task
from ranch.wire import keys

EXECUTION_HISTORY = 200
"""Room messages read back with an execution: the person's message that started its last turn is
among them."""


class ReplayConfigView(BaseModel):
    """A config the operator offers to replay turns on: by name only, never its path or content."""

    name: str


class ReplayConfigs(BaseModel):
    items: list[ReplayConfigView]


class ReplayRequest(Body):
    """`POST /api/v1/replay`: which turn, on which offered config, recorded or live."""

    task_id: Ref
    """A team task (`ranch send` prints it), or a team's execution in a room (its last turn)."""
    config: Ref
    """The name of a config the server offers (`GET /api/v1/replay/configs`)."""
    mode: Literal["recorded", "live"] = "recorded"
    """`recorded`: unchanged members give back their recorded answers; `live`: every member is called."""


async def list_replay_configs(call: Call) -> ReplayConfigs:
    call.caller.require_admin("replay team turns")
    return ReplayConfigs(items=[ReplayConfigView(name=name) for name in call.services.replay_configs])


async def replay_turn(call: Call) -> dict[str, Any]:
    call.caller.require_admin("replay team turns")
    body = await call.body(ReplayRequest)
    offered = call.services.replay_configs
    path = offered.get(body.config)
    if path is None:
        names = ", ".join(offered) or "none; `ranch serve --replay-config NAME=PATH` offers one"
        raise NotFound(f"no replay config '{body.config}' (this server offers: {names})", "config")
    turn = await _recorded_turn(call, body.task_id)
    shown = f"replay config '{body.config}'"
    try:
        config = await anyio.to_thread.run_sync(changes.checked_config, path, shown)
        changes.team_of(config, turn.team, shown)
    except ReplayInputError as exc:
        raise Unprocessable(str(exc), "config") from exc
    changed: dict[str, str] = {}
    if body.mode == "recorded":
        served = call.runtime.registry.config
        known = any(team.id == turn.team for team in served.teams)
        baseline = changes.fingerprints(served, turn.team) if known else None
        changed = changes.changed_members(config, turn.team, baseline)
    replayed = await player.replay(turn, config, mode=body.mode, changed=changed)
    return replayed.to_json()


async def _recorded_turn(call: Call, task_id: str) -> RecordedTurn:
    """The turn `task_id` recorded, when the caller may see it; NotFound naming `task_id` otherwise
    (another organization's task looks absent)."""
    missing = NotFound(f"no task '{task_id}'", "task_id")
    async with call.runtime.sessions() as session:
        stored = await sources.stored_task(session, task_id)
        if stored is None:
            raise missing
        owner, task = stored
        if not owner.startswith(sources.ROOM_OWNER):
            team, _, holder = owner.partition("/")
            if not await _may_read(session, call, holder):
                raise missing
    try:
        if owner.startswith(sources.ROOM_OWNER):  # the room's access rules decide
            try:
                view = await call.runtime.executions.task(call.caller, task_id, EXECUTION_HISTORY)
            except NotFound:  # it names `execution_id`; here the field is `task_id`
                raise missing from None
            account = MessageToDict(view.metadata).get(keys.EXECUTION, {})
            return turn_from_execution(view, str(account.get("agent", "")))
        return turn_from_task(task, team)
    except ReplayInputError as exc:
        raise Unprocessable(str(exc), "task_id") from exc


async def _may_read(session: Any, call: Call, holder: str) -> bool:
    """Whether the caller may replay a team task `holder` made: the superuser any; an owner or admin
    those of its organization's users and agents, and anonymous ones (a hub without `--auth keys`
    shows those to anyone)."""
    caller = call.caller
    if caller.is_superuser or holder in ("", caller.id):
        return True
    if holder.startswith("agent:"):
        query = select(AgentRecord.org_id).where(AgentRecord.id == holder.removeprefix("agent:"))
    else:
        query = select(User.org_id).where(User.id == holder)
    return bool(await session.scalar(query) == caller.org_id)
