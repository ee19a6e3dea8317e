"""`ranch check` warns about a valid team's routing traps, each with its line and its fix, as a user
runs it: a real `ranch check` subprocess on a small YAML file (docs/routing.md, "ranch check")."""

from __future__ import annotations

from pathlib import Path

from _support.servers import Run


def check(ranch: Run, tmp_path: Path, text: str, *flags: str) -> tuple[int, list[str], str]:
    """Run `ranch check` on `text`; its exit code, warning lines (path stripped) and stdout."""
    path = tmp_path / "team.yaml"
    path.write_text(text)
    result = ranch("check", *flags, str(path))
    warnings = [line.removeprefix(f"{path}:") for line in result.stderr.splitlines() if "warning:" in line]
    return result.returncode, warnings, result.stdout


ECHO_CYCLE = """\
agents:
  - {id: a, kind: echo}
  - {id: b, kind: echo}
teams:
  - id: t
    members: [a, b]
    default_agent: a
    routes:
      a: b
      b: a
"""


def test_a_static_cycle_of_members_that_cannot_decide_is_a_warning_at_its_route(
    ranch: Run, tmp_path: Path
) -> None:
    code, warnings, out = check(ranch, tmp_path, ECHO_CYCLE)
    assert code == 0  # a warning does not fail the check
    assert out.startswith("ok: 2 agent(s), 1 team(s)") and "1 warning(s)" in out
    assert len(warnings) == 1
    assert warnings[0].startswith(
        "10: warning: team 't': the static routes a -> b -> a form a cycle no member can leave "
        "('a' is an echo agent; 'b' is an echo agent)"
    )
    assert "max_hops (10)" in warnings[0]
    assert "; fix: end the chain instead of closing it (remove `b: a`, or route 'b' to `user`)" in warnings[0]


def test_strict_fails_on_warnings(ranch: Run, tmp_path: Path) -> None:
    code, warnings, _ = check(ranch, tmp_path, ECHO_CYCLE, "--strict")
    assert code == 1 and len(warnings) == 1


def test_a_cycle_a_member_can_leave_is_no_trap(ranch: Run, tmp_path: Path) -> None:
    """A rules agent with a `route` decides, so the turn can leave the cycle; the same rules agent
    without one cannot, and neither can a remote agent whose card `ranch check` does not read."""
    deciding = ECHO_CYCLE.replace(
        "{id: b, kind: echo}", '{id: b, kind: rules, rules: [{reply: "done", route: user}]}'
    )
    assert check(ranch, tmp_path, deciding, "--strict")[:2] == (0, [])
    silent = ECHO_CYCLE.replace("{id: b, kind: echo}", '{id: b, kind: rules, rules: [{reply: "b: {text}"}]}')
    warnings = check(ranch, tmp_path, silent)[1]
    assert len(warnings) == 1 and "'b' is a rules agent none of whose rules has a `route`" in warnings[0]
    remote = ECHO_CYCLE.replace(
        "{id: b, kind: echo}", '{id: b, kind: remote, url: "http://127.0.0.1:9/a2a/agents/b"}'
    )
    warnings = check(ranch, tmp_path, remote)[1]
    assert len(warnings) == 1
    assert "form a cycle no member surely leaves" in warnings[0]
    assert "'b' is a remote agent that decides only if its card declares client routing" in warnings[0]


def test_a_pipeline_from_the_default_agent_is_no_trap(ranch: Run, tmp_path: Path) -> None:
    """`lead -> p1 -> p2` ends at p2 (docs/routing.md, the pipeline idiom): no cycle, all reached."""
    text = """\
agents:
  - {id: lead, kind: rules, rules: [{reply: "on it: {text}"}]}
  - {id: p1, kind: echo}
  - {id: p2, kind: echo}
teams:
  - {id: t, members: [lead, p1, p2], default_agent: lead, routes: {lead: p1, p1: p2}}
"""
    code, warnings, out = check(ranch, tmp_path, text, "--strict")
    assert (code, warnings) == (0, [])
    assert out == f"ok: 3 agent(s), 1 team(s) in {tmp_path / 'team.yaml'}\n"


def test_an_unreachable_member_and_an_unreachable_approval_member(ranch: Run, tmp_path: Path) -> None:
    text = """\
agents:
  - {id: desk, kind: rules, rules: [{reply: "to helper", route: helper}]}
  - {id: helper, kind: echo}
  - {id: spare, kind: echo}
  - {id: finance, kind: echo}
teams:
  - id: office
    members:
      - desk
      - helper
      - spare
      - finance
    default_agent: desk
    approval:
      members: [finance]
      approvers: {roles: [owner]}
"""
    code, warnings, _ = check(ranch, tmp_path, text)
    assert code == 0
    assert warnings == [
        "11: warning: team 'office': member 'spare' is unreachable: no route leads to it and no member can "
        "decide to send the turn there (only a caller naming it as the recipient reaches it); "
        "fix: add a route to it (e.g. `routes: {desk: spare}`) or a rules `route: spare`, "
        "or remove it from `members`",
        "15: warning: team 'office': approval member 'finance' is unreachable: no route leads to it and no "
        "member can decide to send the turn there, so its approval is never asked; "
        "fix: add a route to it (e.g. `routes: {desk: finance}`) or a rules `route: finance`, "
        "or remove it from `members`",
    ]


def test_a_member_an_llm_agent_may_name_is_reachable(ranch: Run, tmp_path: Path) -> None:
    text = """\
agents:
  - {id: boss, kind: llm, model: m}
  - {id: helper, kind: echo}
teams:
  - {id: t, members: [boss, helper], default_agent: boss, approval: [helper]}
"""
    assert check(ranch, tmp_path, text, "--strict")[:2] == (0, [])


def test_routes_to_and_from_a_member_closed_to_every_caller(ranch: Run, tmp_path: Path) -> None:
    text = """\
agents:
  - {id: desk, kind: llm, model: m}
  - {id: vault, kind: echo}
  - {id: after, kind: echo}
teams:
  - id: office
    members: [desk, vault, after]
    default_agent: desk
    access:
      vault: {allow: ["org:acme"], deny: ["org:acme"]}
    routes:
      desk: vault
      vault: after
"""
    code, warnings, _ = check(ranch, tmp_path, text)
    assert code == 0
    assert warnings == [
        "10: warning: team 'office': `access` closes 'vault' to every caller: no turn ever reaches it; "
        "fix: give 'vault' an `allow` entry its `deny` does not cancel, or drop its `access` entry",
        "12: warning: team 'office': route 'desk' -> 'vault' leads to a member `access` closes to every "
        "caller: the turn goes to 'desk' instead; fix: route 'desk' to a member callers may reach, "
        "or open 'vault' in `access`",
        "13: warning: team 'office': route 'vault' -> 'after' is never taken: `access` closes 'vault'; "
        "fix: remove the route, or open 'vault' in `access`",
    ]


def test_access_that_leaves_someone_in_is_no_trap(ranch: Run, tmp_path: Path) -> None:
    text = """\
agents:
  - {id: desk, kind: llm, model: m}
  - {id: vault, kind: echo}
teams:
  - id: office
    members: [desk, vault]
    default_agent: desk
    access:
      vault: {allow: ["role:admin", "org:acme"], deny: ["user:acme.intern"]}
    routes: {desk: vault}
"""
    assert check(ranch, tmp_path, text, "--strict")[:2] == (0, [])


def test_a_nested_team_leaves_an_outer_cycle_only_with_a_decision_that_crosses_outward(
    ranch: Run, tmp_path: Path
) -> None:
    """A team whose members cannot decide cannot either; one whose member says `user` leaves the
    outer cycle only with `on_done: escalate` (with `return`, its answer follows the outer route)."""
    text = """\
agents:
  - {id: a, kind: echo}
  - {id: chooser, kind: rules, rules: [{reply: "done", route: user}]}
teams:
  - {id: quiet, members: [a], default_agent: a}
  - {id: picky, members: [chooser], default_agent: chooser}
  - {id: loud, members: [chooser], default_agent: chooser, on_done: escalate}
  - {id: outer, members: [a, quiet], default_agent: a, routes: {a: quiet, quiet: a}}
  - {id: back, members: [a, picky], default_agent: a, routes: {a: picky, picky: a}}
  - {id: fine, members: [a, loud], default_agent: a, routes: {a: loud, loud: a}}
"""
    warnings = check(ranch, tmp_path, text)[1]
    assert len(warnings) == 2
    assert warnings[0].startswith("8: warning: team 'outer': the static routes a -> quiet -> a")
    assert "'quiet' is a team none of whose members decides" in warnings[0]
    assert warnings[1].startswith("9: warning: team 'back': the static routes a -> picky -> a")
    assert "'picky' is a team with `on_done: return`: its members' `user` is its answer" in warnings[1]
    assert warnings[1].endswith(", or give 'picky' `on_done: escalate`")
