"""The team the replay tests record a turn of: a rules triage, an a2a-sdk researcher that counts the
messages it gets (`_support.peers`, on 127.0.0.1), and the configs a replay runs the turn on."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from _support.hubkit import RunningRanch, serve_ranch
from _support.peers import RunningPeer, running_peer
from _support.sdk import ask, sdk_client
from ranch.cli import main

Capture = pytest.CaptureFixture[str]

TEAM = """
agents:
  - id: triage
    kind: rules
    rules:
      - {{match: "router saw", reply: "Done. {{text}}", route: {findings}, reason: {why}}}
      - {{match: "(?i)paper", reply: "To research: {{text}}", route: researcher, reason: needs research}}
      - {{match: "(?i)refund", reply: "To billing: {{text}}", route: {refunds}, reason: money}}
  - {{id: researcher, kind: remote, url: "{researcher}"}}
  - {{id: editor, kind: echo}}
  - {{id: billing, kind: echo}}
teams:
  - id: desk
    members: [triage, researcher, editor, billing]
    default_agent: triage
    routes: {{editor: user, billing: user}}
"""
"""The team: papers go to the researcher (which sends its findings back), then to `findings`."""

OLD = {"findings": "user", "refunds": "billing", "why": "findings ready"}
"""As recorded: user -> triage -> researcher -> triage -> user."""
NEW = {**OLD, "findings": "editor"}
"""Triage now hands the findings to the editor: the route parts at hop 3."""
AGAIN = {**OLD, "findings": "researcher"}
"""Triage sends the findings back to the researcher, which was recorded once only."""
REWORDED = {**OLD, "why": "all done"}
"""The same route, triage giving another reason at hop 3."""

ASKED = "find papers on moss"


@dataclass
class Recorded:
    """A served team, the turn it recorded, and the configs to replay it on."""

    ranch: RunningRanch
    researcher: RunningPeer
    store: str
    task_id: str
    configs: Path

    def config(self, name: str) -> str:
        return str(self.configs / f"{name}.yaml")

    def researcher_calls(self) -> int:
        return len(self.researcher.recorder.messages)


def write_configs(folder: Path, researcher: str) -> Path:
    for name, choice in {"old": OLD, "new": NEW, "again": AGAIN, "reworded": REWORDED}.items():
        (folder / f"{name}.yaml").write_text(TEAM.format(researcher=researcher, **choice))
    (folder / "broken.yaml").write_text("agents:\n  - {id: triage, kind: rules, rules: 3}\n")
    return folder


async def record_turn(agent_url: str, text: str) -> str:
    async with sdk_client(agent_url) as client:
        task = await ask(client, text)
    return task.id


@contextlib.contextmanager
def recorded_on(store: str, folder: Path) -> Iterator[Recorded]:
    with running_peer(
        "router", route_to="sender", reason="back with notes", usage={"totalTokens": 12}
    ) as peer:
        configs = write_configs(folder, peer.url)
        with serve_ranch((configs / "old.yaml").read_text(), store) as ranch:
            task_id = anyio.run(record_turn, ranch.agent_url("desk"), ASKED)
            yield Recorded(ranch, peer, store, task_id, configs)


def ranch(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    """`ranch ARGV` in this process: its exit code, stdout and stderr."""
    with pytest.raises(SystemExit) as ended:
        main(list(argv))
    out = capsys.readouterr()
    code = ended.value.code
    return int(code) if isinstance(code, int) else 1, out.out, out.err
