"""Config validation: every problem is reported at once, each with the id it concerns."""

from __future__ import annotations

import pytest

from ranch.config import PythonAgentConfig, RemoteAgentConfig, parse_config
from ranch.exceptions import ConfigError


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_config(text)
    return caught.value.problems


AGENTS = """
agents:
  - {id: a, kind: echo}
  - {id: b, kind: echo}
"""


def test_default_agent_must_be_a_member() -> None:
    found = problems(AGENTS + "teams:\n  - {id: t, members: [a], default_agent: b}\n")
    assert found == ["t: default_agent 'b' is not a member"]


def test_every_member_must_exist() -> None:
    found = problems(AGENTS + "teams:\n  - {id: t, members: [a, ghost], default_agent: a}\n")
    assert found == ["t: member 'ghost' is not a defined agent or team"]


def test_ids_are_unique_across_agents_and_teams() -> None:
    found = problems(AGENTS + "teams:\n  - {id: a, members: [b], default_agent: b}\n")
    assert found == ["a: duplicate id (ids are unique across agents and teams)"]


def test_a_team_may_not_contain_itself_directly() -> None:
    found = problems(AGENTS + "teams:\n  - {id: t, members: [a, t], default_agent: a}\n")
    assert found == ["t: team contains itself (t -> t)"]


def test_a_team_may_not_contain_itself_indirectly() -> None:
    text = AGENTS + (
        "teams:\n"
        "  - {id: t, members: [a, u], default_agent: a}\n"
        "  - {id: u, members: [b, v], default_agent: b}\n"
        "  - {id: v, members: [t], default_agent: t}\n"
    )
    found = problems(text)
    assert "t: team contains itself (t -> u -> v -> t)" in found
    assert all("contains itself" in line for line in found)


def test_all_problems_are_reported_together_with_their_ids() -> None:
    text = """
agents:
  - {id: a, kind: rules, rules: [{match: "(", reply: x, route: nobody}]}
  - {id: b, kind: llm-ish}
  - {id: Bad, kind: echo}
  - {id: c, kind: echo, colour: red}
  - {id: user, kind: echo}
teams:
  - {id: t, members: [a, x], default_agent: y, routes: {a: z}}
"""
    found = problems(text)
    expected_starts = {
        "a: rules[0].match is not a valid regex",
        "a: rules[0].route 'nobody' is not an agent",
        "b: unknown kind 'llm-ish'",
        "Bad: id: String should match pattern",
        "c: colour: Extra inputs are not permitted",
        "user: 'user' is reserved",
        "t: member 'x' is not a defined agent or team",
        "t: default_agent 'y' is not a member",
        "t: route 'a' -> 'z': 'z' is not a member",
    }
    for start in expected_starts:
        assert any(line.startswith(start) for line in found), (start, found)
    assert len(found) == len(expected_starts)


def test_a_member_that_failed_validation_is_not_also_reported_missing() -> None:
    found = problems(
        "agents:\n  - {id: a, kind: echo, bogus: 1}\nteams:\n  - {id: t, members: [a], default_agent: a}\n"
    )
    assert found == ["a: bogus: Extra inputs are not permitted"]


def test_environment_variables_are_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PEER_TOKEN", "s3cret")
    config = parse_config(
        "agents:\n  - {id: r, kind: remote, url: 'http://127.0.0.1:9',\n"
        "     headers: {Authorization: 'Bearer ${PEER_TOKEN}'}}\n"
    )
    remote = config.agents[0]
    assert isinstance(remote, RemoteAgentConfig)
    assert remote.headers == {"Authorization": "Bearer s3cret"}


def test_a_missing_environment_variable_names_the_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOT_SET_ANYWHERE", raising=False)
    found = problems(
        "agents:\n  - {id: r, kind: remote, url: 'http://127.0.0.1:9', headers: {X: '${NOT_SET_ANYWHERE}'}}\n"
    )
    assert found == ["r: environment variable NOT_SET_ANYWHERE is not set"]


def test_not_yaml_and_wrong_shape_are_clear() -> None:
    assert problems("agents: [")[0].startswith("<config>: not valid YAML")
    assert problems("- just\n- a list\n") == [
        "<config>: the top level must be a mapping with `agents` and `teams`"
    ]
    assert problems("agentz: []\n") == [
        "<config>: unknown top-level key(s) agentz; expected agents, teams, retention"
    ]


def test_defaults_follow_the_contract() -> None:
    config = parse_config(AGENTS + "teams:\n  - {id: t, members: [a, b], default_agent: a}\n")
    team = config.teams[0]
    assert (team.max_hops, team.on_invalid_recipient, team.routes) == (10, "fallback", {})
    assert config.agents[0].display_name == "a"


def test_python_entry_must_look_like_module_attr() -> None:
    found = problems("agents:\n  - {id: p, kind: python, entry: not-a-path}\n")
    assert found[0].startswith("p: entry: String should match pattern")
    ok = parse_config("agents:\n  - {id: p, kind: python, entry: 'probes:Probe', client_routing: true}\n")
    assert isinstance(ok.agents[0], PythonAgentConfig)
