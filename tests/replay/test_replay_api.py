"""`GET /api/v1/replay/configs` and `POST /api/v1/replay`: a stored team turn (a team task, or a
team's execution in a room) replayed on a config the operator offered, and each bad input's error
naming its field. One served hub for the module (replay/offered.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from _support.hubkit import ADMIN_KEY, Api, send_text, serve_ranch
from ranch.exceptions import ConfigError
from replay.offered import ASKED, Offering, offering, write_configs


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Offering]:
    with offering(tmp_path_factory.mktemp("replay-api")) as served:
        yield served


@pytest.fixture(scope="module")
def member(hub: Offering) -> Api:
    """A member of the admin's organization: not an owner or admin."""
    made = hub.admin.post("/users", {"id": "plain", "name": "Plain", "role": "member"})
    return Api(hub.ranch.url, made["api_key"])


def replay(hub: Offering, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    response = hub.admin.call("POST", "/replay", body)
    assert response.status_code == status, response.text
    answer: dict[str, Any] = response.json()
    return answer


def error_of(response: Any, status: int) -> tuple[str, str]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    return error["field"], error["message"]


def test_the_offered_configs_are_listed_by_name_only(hub: Offering) -> None:
    listed = hub.admin.get("/replay/configs")
    assert listed == {"items": [{"name": "editor"}, {"name": "broken"}, {"name": "other"}]}


def test_a_team_task_replayed_on_a_changed_config_parts_where_the_config_changed(hub: Offering) -> None:
    answer = replay(hub, {"task_id": hub.task_id, "config": "editor"})
    assert answer["task"] == hub.task_id and answer["team"] == "desk" and answer["input"] == ASKED
    assert answer["old"]["route"] == ["user", "triage", "researcher", "triage", "user"]
    assert answer["new"]["route"] == ["user", "triage", "researcher", "triage", "editor", "user"]
    assert answer["divergedAt"] == 3
    assert answer["divergence"] == "diverged at hop 3: triage now passes to editor (was user)"
    # recorded: only triage's entry differs from the served config's; the researcher gave its answer back
    assert answer["mode"] == "recorded" and answer["changed"] == {"triage": "changed"}
    assert answer["called"] == ["triage", "editor"] and answer["recorded"] == ["researcher"]
    assert [hop["source"] for hop in answer["new"]["hops"]] == ["live", "recorded", "live", "live"]


def test_a_live_replay_calls_every_member(hub: Offering) -> None:
    answer = replay(hub, {"task_id": hub.task_id, "config": "editor", "mode": "live"})
    assert answer["mode"] == "live" and answer["recorded"] == []
    assert answer["called"] == ["triage", "researcher", "editor"]
    assert answer["divergedAt"] == 3


def test_a_teams_turn_in_a_room_is_replayed_from_its_execution(hub: Offering) -> None:
    answer = replay(hub, {"task_id": hub.execution_id, "config": "editor"})
    assert answer["team"] == "desk" and answer["input"] == f"@desk {ASKED}"
    assert answer["old"]["route"] == ["user", "triage", "researcher", "triage", "user"]
    assert answer["new"]["route"] == ["user", "triage", "researcher", "triage", "editor", "user"]
    assert answer["divergedAt"] == 3


def test_an_unknown_task_is_a_404_naming_task_id(hub: Offering) -> None:
    response = hub.admin.call("POST", "/replay", {"task_id": "no-such-task", "config": "editor"})
    assert error_of(response, 404) == ("task_id", "no task 'no-such-task'")


def test_a_member_agents_own_execution_is_not_a_team_turn(hub: Offering) -> None:
    triage = hub.admin.executions("replays")["triage"]["id"]
    field, message = error_of(hub.admin.call("POST", "/replay", {"task_id": triage, "config": "editor"}), 422)
    assert field == "task_id" and "is not a team turn" in message


def test_an_unknown_config_name_is_a_404_naming_config_and_the_offered_ones(hub: Offering) -> None:
    response = hub.admin.call("POST", "/replay", {"task_id": hub.task_id, "config": "/etc/passwd"})
    field, message = error_of(response, 404)
    assert field == "config"
    assert message == "no replay config '/etc/passwd' (this server offers: editor, broken, other)"


def test_a_config_that_fails_check_is_named_never_its_file(hub: Offering) -> None:
    field, message = error_of(
        hub.admin.call("POST", "/replay", {"task_id": hub.task_id, "config": "broken"}), 422
    )
    assert field == "config"
    assert message.startswith("replay config 'broken' fails `ranch check`: ")
    assert "broken.yaml" not in message and "/" not in message.partition(":")[0]


def test_a_config_without_the_turns_team_is_a_422_naming_config(hub: Offering) -> None:
    field, message = error_of(
        hub.admin.call("POST", "/replay", {"task_id": hub.task_id, "config": "other"}), 422
    )
    assert (field, message) == ("config", "replay config 'other' has no team 'desk' (its teams: none)")


def test_a_bad_mode_and_an_unknown_field_are_400s_naming_them(hub: Offering) -> None:
    bad_mode = {"task_id": hub.task_id, "config": "editor", "mode": "fast"}
    assert error_of(hub.admin.call("POST", "/replay", bad_mode), 400)[0] == "mode"
    yaml_sent = {"task_id": hub.task_id, "config": "editor", "yaml": "agents: []"}
    assert error_of(hub.admin.call("POST", "/replay", yaml_sent), 400)[0] == "yaml"


def test_only_an_owner_or_admin_may_list_or_replay(hub: Offering, member: Api) -> None:
    assert member.call("GET", "/replay/configs").status_code == 403
    response = member.call("POST", "/replay", {"task_id": hub.task_id, "config": "editor"})
    assert response.status_code == 403, response.text
    assert "may replay team turns" in response.json()["error"]["message"]


def test_openapi_documents_both_operations(hub: Offering) -> None:
    paths = hub.admin.get("/openapi.json")["paths"]
    assert set(paths["/api/v1/replay"]) == {"post"} and set(paths["/api/v1/replay/configs"]) == {"get"}
    assert {"403", "404", "422"} <= set(paths["/api/v1/replay"]["post"]["responses"])


def test_the_serve_flag_and_its_environment_variable(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from ranch.cli.serve import replay_configs  # here: the other tests run on a hub without the flag too

    config = tmp_path / "new.yaml"
    config.write_text("agents: []\n")
    assert replay_configs([f"new={config}"]) == (("new", str(config.resolve())),)
    monkeypatch.setenv("RANCH_REPLAY_CONFIGS", f"a={config}, b={config}")
    assert [name for name, _ in replay_configs(None)] == ["a", "b"]
    monkeypatch.delenv("RANCH_REPLAY_CONFIGS")
    assert replay_configs(None) == ()
    for given, said in [
        ("new", "give NAME=PATH"),
        (f"new={tmp_path / 'gone.yaml'}", "no file at"),
    ]:
        with pytest.raises(ConfigError, match=said):
            replay_configs([given])
    with pytest.raises(ConfigError, match="given twice"):
        replay_configs([f"a={config}", f"a={config}"])


def test_another_organizations_turns_look_absent(hub: Offering, tmp_path: Path) -> None:
    acme_owner = hub.admin.post("/organizations", {"id": "acme"})["owner"]["api_key"]
    body = {"task_id": hub.execution_id, "config": "editor"}
    response = Api(hub.ranch.url, acme_owner).call("POST", "/replay", body)
    assert error_of(response, 404) == ("task_id", f"no task '{hub.execution_id}'")  # a room it cannot see
    # with --auth keys a team task is its caller's: replayable in the caller's organization only
    paths = write_configs(tmp_path)
    offered = (("editor", str(paths["editor"])),)
    served = paths["served"].read_text()
    with serve_ranch(served, tmp_path / "keys.db", auth="keys", replay_configs=offered) as keyed:
        admin = Api(keyed.url, ADMIN_KEY)
        mine = send_text(keyed.agent_url("desk"), ASKED, uuid.uuid4().hex, key=ADMIN_KEY)["id"]
        assert admin.call("POST", "/replay", {"task_id": mine, "config": "editor"}).json()["divergedAt"] == 3
        other = Api(keyed.url, admin.post("/organizations", {"id": "acme"})["owner"]["api_key"])
        response = other.call("POST", "/replay", {"task_id": mine, "config": "editor"})
        assert error_of(response, 404) == ("task_id", f"no task '{mine}'")
