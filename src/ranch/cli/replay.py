"""`ranch replay TASK_ID --config NEW.yaml`: a recorded team turn run again on a changed team, the old
and new routes side by side (docs/replay.md). Bad input (an unknown task, a config that fails
`ranch check`) is one line and exit code 2."""

from __future__ import annotations

import argparse
import json
import os
import sys
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from ranch.config import RanchConfig
    from ranch.replay.recording import RecordedTurn

HELP = "re-run a recorded team turn on a changed config; old and new routes side by side"
STORE_URL = "sqlite+aiosqlite:///ranch.db"
"""`ranch serve`'s default database (hub/app.py), where its tasks are."""
UNCHANGED_NOTE = (
    "note: no --baseline and no --changed, so every member the turn reached counts as unchanged and "
    "gives back its recorded answers; only members it never reached are called"
)


def register(commands: Any) -> None:
    parser = commands.add_parser("replay", help=HELP)
    parser.add_argument("task", metavar="TASK_ID", help="the team task to replay (`ranch send` prints it)")
    parser.add_argument("--config", required=True, help="the (changed) config to replay the turn on")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--recorded",
        dest="mode",
        action="store_const",
        const="recorded",
        help="give back unchanged members' recorded answers; call only changed or new ones (default)",
    )
    mode.add_argument("--live", dest="mode", action="store_const", const="live", help="call every member")
    parser.set_defaults(mode="recorded")
    parser.add_argument("--json", action="store_true", help="print the replay as JSON, for scripts")
    parser.add_argument(
        "--db",
        default=None,
        metavar="URL",
        help=f"the task store (env RANCH_DATABASE_URL; default {STORE_URL})",
    )
    parser.add_argument(
        "--from",
        dest="remote",
        metavar="URL",
        help="read the task from another ranch over A2A: the team's URL (…/a2a/agents/ID)",
    )
    parser.add_argument(
        "--key", default=os.environ.get("RANCH_API_KEY", ""), help="API key for --from (env RANCH_API_KEY)"
    )
    parser.add_argument("--team", help="the team the task belongs to (default: the one that recorded it)")
    parser.add_argument(
        "--baseline",
        metavar="OLD.yaml",
        help="the config the turn was recorded on (members whose entries changed are called)",
    )
    parser.add_argument(
        "--changed", default="", metavar="IDS", help="comma-separated members to call in a recorded replay"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ranch.replay import changes, player, render
    from ranch.replay.recording import ReplayInputError

    config = checked_config(args.config)
    old = checked_config(args.baseline) if args.baseline else None
    turn = anyio.run(_recorded_turn, args)
    team = changes.team_of(config, turn.team, args.config)
    named = [name.strip() for name in args.changed.split(",") if name.strip()]
    for name in named:
        if name not in team.members:
            raise ReplayInputError(f"--changed: '{name}' is not a member of team '{turn.team}'")
    baseline = changes.fingerprints(old, turn.team) if old is not None else None
    changed = changes.changed_members(config, turn.team, baseline, named)
    if args.mode == "recorded" and baseline is None and not named:
        print(UNCHANGED_NOTE, file=sys.stderr)
    replayed = anyio.run(partial(player.replay, turn, config, mode=args.mode, changed=changed))
    if args.json:
        print(json.dumps(replayed.to_json(), indent=2))
    else:
        print("\n".join(render.replay_lines(replayed, args.config)))
    return 0


async def _recorded_turn(args: argparse.Namespace) -> RecordedTurn:
    from ranch.replay import sources

    if args.remote:
        return await sources.from_remote(args.remote, args.task, args.team, args.key)
    return await sources.from_store(store_url(args.db), args.task, args.team)


def checked_config(path: str) -> RanchConfig:
    """The config at `path`, or one line saying it fails `ranch check` (`replay.changes`, loaded when
    a command needs it: `ranch --help` stays quick)."""
    from ranch.replay.changes import checked_config as checked

    return checked(path)


def store_url(given: str | None) -> str:
    return given or os.environ.get("RANCH_DATABASE_URL") or STORE_URL
