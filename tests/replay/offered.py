"""A hub that offers configs to replay turns on (`--replay-config`), one turn recorded in a room and
one over A2A: what the REST replay tests and the page's replay test share. Every member is a rules
or echo agent, so a replay takes milliseconds."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, send_text, serve_ranch, wait_until

TEAM = """
agents:
  - id: triage
    kind: rules
    rules:
      - {{match: "notes on", reply: "Done. {{text}}", route: {findings}, reason: findings ready}}
      - {{match: "(?i)paper", reply: "To research: {{text}}", route: researcher, reason: needs research}}
  - id: researcher
    kind: rules
    rules: [{{match: ".*", reply: "notes on {{text}}", route: sender, reason: back with notes}}]
  - {{id: editor, kind: echo}}
teams:
  - id: desk
    members: [triage, researcher, editor]
    default_agent: triage
    routes: {{editor: user}}
"""
"""Papers go to the researcher, which sends its notes back; triage then passes them to `findings`."""

ASKED = "find papers on moss"
ROOM = "replays"


@dataclass
class Offering:
    """The served hub, its admin's API, and the turns it recorded."""

    ranch: RunningRanch
    admin: Api
    task_id: str
    """A team task, sent over A2A."""
    execution_id: str
    """The team's execution in the room ROOM, one turn done."""


def write_configs(folder: Path) -> dict[str, Path]:
    files = {
        "served": TEAM.format(findings="user"),
        "editor": TEAM.format(findings="editor"),  # the route parts at hop 3
        "broken": "agents:\n  - {id: triage, kind: rules, rules: 3}\n",
        "other": "agents:\n  - {id: solo, kind: echo}\n",
    }
    paths = {}
    for name, text in files.items():
        paths[name] = folder / f"{name}.yaml"
        paths[name].write_text(text)
    return paths


@contextlib.contextmanager
def offering(folder: Path) -> Iterator[Offering]:
    """The hub on the `served` config, offering `editor`, `broken` and `other` (no team desk)."""
    paths = write_configs(folder)
    offered = tuple((name, str(paths[name])) for name in ("editor", "broken", "other"))
    with serve_ranch(paths["served"].read_text(), folder / "hub.db", replay_configs=offered) as ranch:
        admin = Api(ranch.url, ADMIN_KEY)
        # plain JSON-RPC, no event loop of its own: the browser tests run Playwright's
        task_id = str(send_text(ranch.agent_url("desk"), ASKED, uuid.uuid4().hex)["id"])
        admin.post("/rooms", {"id": ROOM, "participants": [{"kind": "team", "id": "desk"}]})
        admin.post(f"/rooms/{ROOM}/messages", {"text": f"@desk {ASKED}"})
        wait_until(lambda: _turn_done(admin), what="the team's turn in the room")
        execution_id = str(admin.executions(ROOM)["desk"]["id"])
        yield Offering(ranch, admin, task_id, execution_id)


def _turn_done(admin: Api) -> bool:
    hops = [e for e in admin.get(f"/rooms/{ROOM}/events", since=0)["items"] if e["type"] == "routing.decided"]
    return admin.execution_status(ROOM, "desk") == "ready" and len(hops) == 3
