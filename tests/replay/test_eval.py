"""`ranch eval`: a routing regression suite passes on the team it describes and fails, with an exit code
for CI, when a route property breaks; `--record` turns a team's last turns into such a suite."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
import yaml

from replay.team import ASKED, Capture, Recorded, ranch, record_turn

PLAIN = """
team: desk
config: old.yaml
cases:
  - name: papers go to research
    input: find papers on moss
    expect: {reaches: [researcher], never_reaches: [billing, editor], ends_at: user, within: 3,
             max_tokens: 12}
  - name: refunds go to billing
    input: I want a refund
    expect: {reaches: [billing], answered_by: billing, within: 2, state: completed}
"""


def suite(folder: Path, text: str, name: str = "suite.yaml") -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


def test_a_suite_passes_on_its_team_and_fails_when_a_route_property_breaks(
    capsys: Capture, recorded: Recorded
) -> None:
    path = suite(recorded.configs, PLAIN)
    code, out, err = ranch(capsys, "eval", path)
    assert code == 0, out + err
    assert out.splitlines()[-1] == "2 case(s): 2 passed, 0 failed"
    assert "papers go to research  pass    user -> triage -> researcher -> triage -> user" in out
    code, out, err = ranch(capsys, "eval", path, "--config", recorded.config("new"))
    assert code == 1, err
    lines = out.splitlines()
    assert "papers go to research  FAIL    user -> triage -> researcher -> triage -> editor -> user" in lines
    failed = lines.index(
        "papers go to research  FAIL    user -> triage -> researcher -> triage -> editor -> user"
    )
    assert [line.strip() for line in lines[failed + 1 : failed + 3]] == [
        "- reaches editor",
        "- took 4 hops (at most 3)",
    ]
    assert lines[-1] == "2 case(s): 1 passed, 1 failed"
    code, out, _ = ranch(capsys, "eval", path, "--config", recorded.config("new"), "--json")
    results = {case["name"]: case for case in json.loads(out)["cases"]}
    assert code == 1 and results["refunds go to billing"]["passed"] is True
    assert results["papers go to research"]["failures"] == ["reaches editor", "took 4 hops (at most 3)"]


def test_record_writes_the_last_turns_and_a_changed_team_fails_them(
    capsys: Capture, recorded: Recorded
) -> None:
    anyio.run(record_turn, recorded.ranch.agent_url("desk"), "I want a refund")
    path = recorded.configs / "recorded.yaml"
    argv = ["eval", str(path), "--record", "--team", "desk", "--last", "2", "--db", recorded.store]
    code, out, err = ranch(capsys, *argv, "--config", recorded.config("old"))
    assert (code, out) == (0, f"wrote 2 turn(s) of team desk to {path}\n"), err
    written = yaml.safe_load(path.read_text())
    assert written["config"] == "old.yaml" and set(written["baseline"]) == {
        "desk", "triage", "researcher", "editor", "billing",
    }  # fmt: skip
    assert [case["recorded"]["input"] for case in written["cases"]] == [ASKED, "I want a refund"]
    assert [hop["agent"] for hop in written["cases"][0]["recorded"]["hops"]] == [
        "triage",
        "researcher",
        "triage",
    ]
    calls = recorded.researcher_calls()
    code, out, err = ranch(capsys, "eval", str(path))
    assert code == 0, out + err
    code, out, err = ranch(capsys, "eval", str(path), "--config", recorded.config("new"))
    assert code == 1, err
    assert "  - diverged at hop 3: triage now passes to editor (was user)" in out
    assert out.splitlines()[-1] == "2 case(s): 1 passed, 1 failed"
    assert recorded.researcher_calls() == calls  # recorded cases: the unchanged researcher got no message
    code, _, err = ranch(capsys, *argv)
    assert (code, err.splitlines()) == (2, [f"error: {path} exists; --force overwrites it"])


# -- bad input: one line each, exit code 2 -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (
            "team: desk\ncases:\n  - {input: hi, expect: {within: four}}\n",
            "cases[0].expect.within: Input should be a valid integer, unable to parse string as an integer",
        ),
        (
            "team: desk\ncases:\n  - {input: hi, expect: {reaches: [reseacher]}}\n",
            "cases[0].expect.reaches: 'reseacher' is not a member of team 'desk'",
        ),
        (
            "team: desk\ncases:\n  - {input: hi, recorded: {input: hi, hops: []}}\n",
            "cases[0].recorded.hops: ",
        ),
        ("team: desk\ncases:\n  - {input: hi, expected: {}}\n", "cases[0].expected: unknown key"),
        ("cases: [{input: hi}]\n", "cases[0].team: no team named (give `team:` to the suite or the case)"),
        ("team: desk\ncases: [\n", "not valid YAML: "),
    ],
    ids=["mistyped", "stranger", "no-hops", "unknown-key", "no-team", "not-yaml"],
)
def test_a_suite_with_an_error_is_one_line(
    capsys: Capture, recorded: Recorded, text: str, problem: str
) -> None:
    path = suite(recorded.configs, text, "bad.yaml")
    code, out, err = ranch(capsys, "eval", path, "--config", recorded.config("old"))
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line.startswith(f"error: {path}: {problem}")


def test_a_config_that_fails_ranch_check_is_one_line(capsys: Capture, recorded: Recorded) -> None:
    path = suite(recorded.configs, PLAIN)
    code, out, err = ranch(capsys, "eval", path, "--config", recorded.config("broken"))
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: {recorded.config('broken')} fails `ranch check`: triage: rules: Input should be a valid list"
    ]
