"""`ranch replay`: a turn recorded on one config, replayed on a changed one (docs/replay.md).

The researcher is a remote a2a-sdk peer that counts the messages it gets: a recorded replay must
send it none while it is unchanged; a live one calls it again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from replay.team import ASKED, Capture, Recorded, ranch

OLD_ROUTE = ["user", "triage", "researcher", "triage", "user"]
NEW_ROUTE = ["user", "triage", "researcher", "triage", "editor", "user"]
NOT_A_LIST = "Input should be a valid list"


def replay(capsys: Capture, served: Recorded, config: str, *argv: str) -> tuple[int, str, str]:
    """`ranch replay` of the recorded turn, from the store, on the config named `config`."""
    return ranch(
        capsys, "replay", served.task_id, "--db", served.store, "--config", served.config(config), *argv
    )


def replayed(capsys: Capture, served: Recorded, config: str, *argv: str) -> dict[str, Any]:
    code, out, err = replay(capsys, served, config, "--json", *argv)
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_a_recorded_replay_on_a_changed_team_diverges_and_calls_no_unchanged_member(
    capsys: Capture, recorded: Recorded
) -> None:
    calls = recorded.researcher_calls()
    data = replayed(capsys, recorded, "new", "--baseline", recorded.config("old"), "--recorded")
    assert data["changed"] == {"triage": "changed"}
    assert data["old"]["route"] == OLD_ROUTE and data["new"]["route"] == NEW_ROUTE
    assert data["divergedAt"] == 3
    assert data["divergence"] == "diverged at hop 3: triage now passes to editor (was user)"
    researcher, old_researcher = data["new"]["hops"][1], data["old"]["hops"][1]
    assert researcher["source"] == "recorded" and researcher["reply"] == old_researcher["reply"]
    assert researcher["tokens"] == 12 and researcher["ms"] == old_researcher["ms"]  # what it cost then
    assert data["called"] == ["triage", "editor"] and data["recorded"] == ["researcher"]
    assert recorded.researcher_calls() == calls  # the unchanged remote member got no message


def test_a_live_replay_calls_every_member(capsys: Capture, recorded: Recorded) -> None:
    calls = recorded.researcher_calls()
    data = replayed(capsys, recorded, "new", "--live")
    assert data["new"]["route"] == NEW_ROUTE and data["divergedAt"] == 3
    assert {hop["source"] for hop in data["new"]["hops"]} == {"live"}
    (*_, last) = recorded.researcher.recorder.wait_for_messages(calls + 1)
    assert last.text.endswith(f"To research: {ASKED}")


def test_the_unchanged_config_gives_the_same_route_from_recordings_alone(
    capsys: Capture, recorded: Recorded
) -> None:
    calls = recorded.researcher_calls()
    data = replayed(capsys, recorded, "old", "--baseline", recorded.config("old"))
    assert data["changed"] == {} and data["divergedAt"] is None and data["divergence"] == "same route"
    assert data["new"]["route"] == OLD_ROUTE and data["called"] == []
    assert [hop["reply"] for hop in data["new"]["hops"]] == [hop["reply"] for hop in data["old"]["hops"]]
    assert recorded.researcher_calls() == calls


def test_a_changed_reason_on_the_same_route_is_marked(capsys: Capture, recorded: Recorded) -> None:
    code, out, err = replay(capsys, recorded, "reworded", "--changed", "triage")
    assert code == 0, err
    rows = [line for line in out.splitlines() if line[2:5].strip().rstrip(".").isdigit()]
    assert [row[:5] for row in rows] == ["   1.", "   2.", "~  3."]
    assert "same route; another reason at hop 3" in out.splitlines()


def test_a_replay_stops_at_an_unchanged_member_with_no_recorded_answer_left(
    capsys: Capture, recorded: Recorded
) -> None:
    calls = recorded.researcher_calls()
    data = replayed(capsys, recorded, "again", "--changed", "triage")
    assert data["changed"] == {"triage": "named by --changed"}
    assert data["new"]["route"] == ["user", "triage", "researcher", "triage", "researcher"]
    assert data["new"]["stopped"] == (
        "researcher is unchanged and has no recorded answer for its visit 2 (--live calls it)"
    )
    assert data["divergence"] == "diverged at hop 3: triage now passes to researcher (was user)"
    assert recorded.researcher_calls() == calls


def test_the_report_shows_both_routes_side_by_side(capsys: Capture, recorded: Recorded) -> None:
    code, out, err = replay(capsys, recorded, "new", "--changed", "triage")
    assert code == 0, err
    lines = out.splitlines()
    head = f"replay of task {recorded.task_id} (team desk) on {recorded.config('new')}, recorded"
    assert lines[0] == f"{head}; changed: triage (named by --changed)"
    assert lines[1] == f"input: {ASKED}"
    rows = [line for line in lines if line[2:5].strip().rstrip(".").isdigit()]
    assert [row[:5] for row in rows] == ["   1.", "   2.", "!  3.", "!  4."]
    old, new = rows[1].split(" | ")
    assert old.split()[1:4] == ["researcher", "->", "triage"] and "12 tok" in old
    assert new.split()[:3] == ["researcher", "->", "triage"] and new.endswith("recorded")
    assert rows[3].split(" | ")[0].strip() == "!  4."  # the old route made no fourth hop
    assert f"old route: {' -> '.join(OLD_ROUTE)}   (3 hop(s), 12 tokens, completed)" in lines
    assert f"new route: {' -> '.join(NEW_ROUTE)}   (4 hop(s), 12 tokens, completed)" in lines
    assert "called: triage, editor; recorded answers given back: researcher" in lines
    code, out, err = replay(capsys, recorded, "again", "--changed", "triage")
    assert code == 0, err
    stopped = "researcher is unchanged and has no recorded answer for its visit 2 (--live calls it)"
    assert f"replay stopped at hop 4: {stopped}" in out.splitlines()


def test_a_task_fetched_from_another_ranch_over_a2a(capsys: Capture, recorded: Recorded) -> None:
    url = recorded.ranch.agent_url("desk")
    new = recorded.config("new")
    code, out, err = ranch(
        capsys, "replay", recorded.task_id, "--from", url, "--config", new, "--changed", "triage", "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert data["team"] == "desk" and data["old"]["route"] == OLD_ROUTE
    assert data["new"]["route"] == NEW_ROUTE and data["divergedAt"] == 3


def test_a_turn_stored_on_postgresql(capsys: Capture, recorded_on_postgres: Recorded) -> None:
    served = recorded_on_postgres
    calls = served.researcher_calls()
    data = replayed(capsys, served, "new", "--baseline", served.config("old"))
    assert data["old"]["route"] == OLD_ROUTE and data["new"]["route"] == NEW_ROUTE
    assert data["divergedAt"] == 3 and data["recorded"] == ["researcher"]
    assert served.researcher_calls() == calls


# -- bad input: one line each, exit code 2 -------------------------------------------------------------


def test_an_unknown_task_is_one_line(capsys: Capture, recorded: Recorded) -> None:
    new = recorded.config("new")
    code, out, err = ranch(capsys, "replay", "no-such-task", "--db", recorded.store, "--config", new)
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"error: no task 'no-such-task' in {recorded.store}"]


def test_a_config_that_fails_ranch_check_is_one_line(capsys: Capture, recorded: Recorded) -> None:
    code, out, err = replay(capsys, recorded, "broken")
    assert (code, out) == (2, "")
    (line,) = err.splitlines()
    assert line == f"error: {recorded.config('broken')} fails `ranch check`: triage: rules: {NOT_A_LIST}"


def test_a_missing_store_an_absent_team_and_a_stranger_are_one_line_each(
    capsys: Capture, recorded: Recorded, tmp_path: Path
) -> None:
    new = recorded.config("new")
    missing = tmp_path / "absent.db"
    code, _, err = ranch(capsys, "replay", "t1", "--db", f"sqlite+aiosqlite:///{missing}", "--config", new)
    assert (code, err.splitlines()) == (2, [f"error: no database at {missing} (--db, or RANCH_DATABASE_URL)"])
    assert not missing.exists()  # the replay made no empty database there
    code, _, err = replay(capsys, recorded, "new", "--team", "ops")
    assert (code, err.splitlines()) == (2, [f"error: {new} has no team 'ops' (its teams: desk)"])
    code, _, err = replay(capsys, recorded, "new", "--changed", "x")
    assert (code, err.splitlines()) == (2, ["error: --changed: 'x' is not a member of team 'desk'"])
