"""A routing regression suite (`ranch eval SUITE.yaml`): recorded turns and plain inputs, each with
the route properties it must keep. The file's schema, its problems named by field, and the file
`ranch eval --record` writes from a team's last turns.

    team: desk                    # each case's team unless the case names its own
    config: team.yaml             # relative to the suite; `--config` overrides it
    mode: recorded                # recorded cases: give back unchanged members' answers, or `live`
    baseline: {triage: 3f2a…}     # the members' fingerprints when recorded (`--record` writes it)
    cases:
      - name: papers go to research
        input: find papers on moss
        expect: {reaches: [researcher], never_reaches: [billing], ends_at: user, within: 4,
                 max_tokens: 500}
      - recorded: {task: …, input: …, hops: [{agent, sender, recipient, reason, ms, reply}, …]}
        expect: {same_route: true}  # the default for a recorded case
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ranch.config import RanchConfig
from ranch.replay.recording import RecordedTurn, turn_from_json
from ranch.wire import client_routing


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Expect(_Strict):
    """The route properties a case must keep; every one given is checked."""

    reaches: list[str] = Field(default_factory=list)
    """Members that must have the turn at some hop (inside member teams too)."""
    never_reaches: list[str] = Field(default_factory=list)
    ends_at: str | None = None
    """Where the last hop passes the turn: `user` for an answered turn, or a member."""
    answered_by: str | None = None
    """The member that made the last hop."""
    within: int | None = Field(default=None, ge=1)
    """At most this many hops (a member team's counted as the hops inside it, as `max_hops` counts)."""
    max_tokens: int | None = Field(default=None, ge=0)
    """At most this many tokens, as the members reported them."""
    state: Literal["completed", "input-required", "failed"] | None = None
    same_route: bool | None = None
    """The same hops (agent, sender, recipient) as recorded; a recorded case's default."""


class RecordedHopEntry(_Strict):
    agent: str
    sender: str
    recipient: str
    reason: str = ""
    ms: float = 0.0
    tokens: int | None = Field(default=None, ge=0)
    reply: str = ""
    parts: list[dict[str, Any]] | None = None
    trail: list[dict[str, Any]] | None = None
    loop: bool = False


class FailureEntry(_Strict):
    agent: str
    message: str = ""


class RecordedEntry(_Strict):
    task: str = ""
    input: str
    parts: list[dict[str, Any]] | None = None
    state: Literal["completed", "input-required", "failed"] = "completed"
    hops: list[RecordedHopEntry] = Field(min_length=1)
    failure: FailureEntry | None = None


class Case(_Strict):
    name: str | None = None
    team: str | None = None
    input: str | None = None
    """A plain input: run live, every member called."""
    recorded: RecordedEntry | None = None
    """A recorded turn: replayed (the suite's `mode`), its route compared with the recorded one."""
    expect: Expect = Field(default_factory=Expect)

    @model_validator(mode="after")
    def _one_of(self) -> Case:
        if (self.input is None) == (self.recorded is None):
            raise ValueError("give either `input` (a plain input) or `recorded` (a recorded turn)")
        return self


class Suite(_Strict):
    team: str | None = None
    config: str | None = None
    mode: Literal["recorded", "live"] = "recorded"
    baseline: dict[str, str] | None = None
    cases: list[Case] = Field(min_length=1)


class SuiteError(Exception):
    """Every problem of a suite file, each one line naming the field."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        super().__init__("\n".join(problems))


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file; SuiteError lists every problem, `file: field: what`."""
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SuiteError([f"{path}: cannot read the file ({exc.strerror})"]) from exc
    except yaml.YAMLError as exc:
        raise SuiteError([f"{path}: not valid YAML: {' '.join(str(exc).split())}"]) from exc
    if not isinstance(raw, dict):
        raise SuiteError([f"{path}: the top level must be a mapping with `cases`"])
    try:
        return Suite.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{path}: {_where(error['loc'])}: {_what(error)}" for error in exc.errors()]
        raise SuiteError(problems) from exc


def check_against(suite: Suite, config: RanchConfig, path: str | Path) -> None:
    """The names the suite uses, against the config: each case's team, and the members it expects."""
    teams = {team.id: team for team in config.teams}
    problems = []
    for index, case in enumerate(suite.cases):
        where = f"{path}: cases[{index}]"
        team_id = case.team or suite.team
        if team_id is None:
            problems.append(f"{where}.team: no team named (give `team:` to the suite or the case)")
            continue
        team = teams.get(team_id)
        if team is None:
            problems.append(f"{where}.team: '{team_id}' is not a team of the config ({', '.join(teams)})")
            continue
        for field, names in _member_fields(case.expect):
            for name in names:
                if name not in team.members and not (field == "ends_at" and name == client_routing.USER):
                    problems.append(f"{where}.expect.{field}: '{name}' is not a member of team '{team_id}'")
    if problems:
        raise SuiteError(problems)


def case_turn(suite: Suite, case: Case) -> RecordedTurn:
    """The turn a case replays: its recorded one, or its plain input with no hops recorded."""
    team = case.team or suite.team or ""
    if case.recorded is not None:
        return turn_from_json(case.recorded.model_dump(exclude_none=True), team)
    return turn_from_json({"input": case.input, "hops": [], "state": "completed"}, team)


def case_name(index: int, case: Case) -> str:
    if case.name:
        return case.name
    text = case.input if case.input is not None else case.recorded.input if case.recorded else ""
    return f"case {index + 1}: {' '.join(text.split())[:40]}"


def recorded_suite(
    turns: list[RecordedTurn],
    team: str,
    *,
    source: str,
    config: str | None = None,
    baseline: dict[str, str] | None = None,
) -> str:
    """The suite file `ranch eval --record` writes: one recorded case per turn, same route expected."""
    data: dict[str, Any] = {"team": team}
    if config is not None:
        data["config"] = config
    data["mode"] = "recorded"
    if baseline is not None:
        data["baseline"] = baseline
    data["cases"] = [
        {
            "name": f"turn {number}: {' '.join(turn.text.split())[:40]}",
            "recorded": turn.to_json(),
            "expect": {"same_route": True},
        }
        for number, turn in enumerate(turns, 1)
    ]
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    head = f"# the last {len(turns)} turn(s) of team {team} in {source}: `ranch eval --record`, {when}\n"
    return head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=110)


def _member_fields(expect: Expect) -> list[tuple[str, list[str]]]:
    fields = [("reaches", expect.reaches), ("never_reaches", expect.never_reaches)]
    if expect.ends_at is not None:
        fields.append(("ends_at", [expect.ends_at]))
    if expect.answered_by is not None:
        fields.append(("answered_by", [expect.answered_by]))
    return fields


def _where(loc: tuple[int | str, ...]) -> str:
    """`('cases', 1, 'expect', 'within')` -> `cases[1].expect.within`."""
    text = ""
    for step in loc:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text or "(top level)"


def _what(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key"
    return str(error["msg"]).removeprefix("Value error, ")
