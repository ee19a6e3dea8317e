"""`ranch check`'s look at each team's routing: the traps a valid config can still hold.

A config can pass validation and still send every turn round a static cycle, route to a member no
caller may reach, or hold members nothing ever routes to. Each such trap is a `Finding` with the
line of the file it starts at and the change that removes it; none stops a config from being served.
The rules are docs/routing.md's ("One user turn through a team", "The caller"): a member that
decides nothing follows its static route, else the turn goes to the default agent, and a chain of
static routes that began at the default agent ends at its last stage.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml

from ranch.config import (
    AgentConfig,
    EchoAgentConfig,
    LlmAgentConfig,
    MemberAccess,
    PythonAgentConfig,
    RanchConfig,
    RemoteAgentConfig,
    RulesAgentConfig,
    TeamConfig,
)

Decides = Literal["yes", "no", "maybe"]
"""Whether a member can make a routing decision: `maybe` for a remote agent, whose card (and so
whether it declares client routing) `ranch check` does not read."""

EVERY_KIND = frozenset({"kind:person", "kind:agent"})


@dataclass(frozen=True)
class Finding:
    """One trap in a team: where it is, what goes wrong, and how to fix it."""

    line: int
    team: str
    problem: str
    fix: str

    def render(self, source: str) -> str:
        return f"{source}:{self.line}: warning: team '{self.team}': {self.problem}; fix: {self.fix}"


def lint_file(path: str | Path, config: RanchConfig) -> list[Finding]:
    """The traps in `config`, read from the file at `path` (for the lines)."""
    return lint(config, Path(path).read_text(encoding="utf-8"))


def lint(config: RanchConfig, text: str) -> list[Finding]:
    """Every team's traps, in file order; `text` is the YAML `config` was validated from."""
    teams = Teams(config, Positions(text))
    return [finding for team in config.teams for finding in teams.findings(team)]


class Teams:
    """What the checks know of the whole config: each agent and team by id, and the file's lines."""

    def __init__(self, config: RanchConfig, positions: Positions) -> None:
        self.agents: dict[str, AgentConfig] = {agent.id: agent for agent in config.agents}
        self.teams = {team.id: team for team in config.teams}
        self.positions = positions

    def findings(self, team: TeamConfig) -> Iterator[Finding]:
        closed = {m for m, rule in team.access.items() if m in team.members and closed_to_all(rule)}
        yield from self._closed(team, closed)
        yield from self._cycles(team)
        yield from self._unreached(team, closed)

    # -- what a member can do ------------------------------------------------------------------

    def decides(self, member: str, seen: frozenset[str] = frozenset()) -> Decides:
        """Whether `member` can name the next recipient (a team: if one of its members can)."""
        agent = self.agents.get(member)
        if isinstance(agent, LlmAgentConfig):
            return "yes"
        if isinstance(agent, RulesAgentConfig):
            return "yes" if any(rule.route is not None for rule in agent.rules) else "no"
        if isinstance(agent, PythonAgentConfig):
            return "yes" if agent.client_routing else "no"
        if isinstance(agent, EchoAgentConfig):
            return "no"
        team = self.teams.get(member)
        if team is None or member in seen:
            return "maybe"  # a remote agent (or a team that contains itself, refused elsewhere)
        inner = {self.crosses(m, team, seen | {member}) for m in team.members}
        return "yes" if "yes" in inner else "maybe" if "maybe" in inner else "no"

    def crosses(self, member: str, team: TeamConfig, seen: frozenset[str]) -> Decides:
        """Whether a decision of `member` can leave `team` for its caller. With `on_done: return`
        (the default) a member's `user` is the team's answer and the caller's static route still
        applies, so only `sender` or an id outside the team crosses (docs/routing.md, "Teams of teams")."""
        agent = self.agents.get(member)
        escalates = team.on_done == "escalate"
        if isinstance(agent, RulesAgentConfig):
            outward = {"sender", *(["user"] if escalates else [])}
            named = {rule.route for rule in agent.rules if rule.route is not None}
            return "yes" if named & outward or named - set(team.members) - {"user"} else "no"
        verdict = self.decides(member, seen)
        return verdict if escalates or verdict == "no" else "maybe"  # it may say `sender`

    def why_not(self, member: str) -> str:
        """Why `member` makes no decision, in a few words."""
        agent = self.agents.get(member)
        if isinstance(agent, EchoAgentConfig):
            return f"'{member}' is an echo agent"
        if isinstance(agent, RulesAgentConfig):
            return f"'{member}' is a rules agent none of whose rules has a `route`"
        if isinstance(agent, PythonAgentConfig):
            return f"'{member}' is a python agent without `client_routing: true`"
        if isinstance(agent, RemoteAgentConfig):
            return f"'{member}' is a remote agent that decides only if its card declares client routing"
        if member in self.returning():
            return (
                f"'{member}' is a team with `on_done: return`: its members' `user` is its answer, and "
                "its caller's static route goes on"
            )
        surely = "surely " if self.decides(member) == "maybe" else ""
        return f"'{member}' is a team none of whose members {surely}decides"

    def returning(self) -> set[str]:
        """Teams whose members could decide but whose `on_done: return` keeps their `user` inside."""
        return {
            team.id
            for team in self.teams.values()
            if team.on_done == "return" and any(self.decides(m) != "no" for m in team.members)
        }

    def may_name(self, member: str, team: TeamConfig) -> set[str]:
        """The members of `team` a decision of `member` may send the turn to."""
        agent = self.agents.get(member)
        if isinstance(agent, RulesAgentConfig):
            return {rule.route for rule in agent.rules if rule.route in team.members}
        return set(team.members) if self.decides(member) != "no" else set()

    # -- the checks ----------------------------------------------------------------------------

    def _closed(self, team: TeamConfig, closed: set[str]) -> Iterator[Finding]:
        """Members `access` closes to every caller, and the routes that lead to or from them."""
        for member in sorted(closed, key=team.members.index):
            if member == team.default_agent:
                problem = f"`access` closes the default agent '{member}' to every caller: every turn fails"
            else:
                problem = f"`access` closes '{member}' to every caller: no turn ever reaches it"
            fix = f"give '{member}' an `allow` entry its `deny` does not cancel, or drop its `access` entry"
            yield self._at(team, ("access", member), problem, fix)
        for source, target in team.routes.items():
            if target in closed:
                problem = (
                    f"route '{source}' -> '{target}' leads to a member `access` closes to every caller: "
                    f"the turn goes to '{team.default_agent}' instead"
                )
                fix = f"route '{source}' to a member callers may reach, or open '{target}' in `access`"
                yield self._at(team, ("routes", source), problem, fix)
            elif source in closed and source != team.default_agent:
                problem = f"route '{source}' -> '{target}' is never taken: `access` closes '{source}'"
                fix = f"remove the route, or open '{source}' in `access`"
                yield self._at(team, ("routes", source), problem, fix)

    def _cycles(self, team: TeamConfig) -> Iterator[Finding]:
        """Static cycles whose members all decide nothing: a turn that enters one never leaves."""
        for cycle in route_cycles(team):
            verdicts = {member: self.decides(member) for member in cycle}
            if "yes" in verdicts.values():
                continue
            loop = " -> ".join([*cycle, cycle[0]])
            reasons = "; ".join(self.why_not(member) for member in cycle)
            leaves = "no member can leave" if "maybe" not in verdicts.values() else "no member surely leaves"
            problem = (
                f"the static routes {loop} form a cycle {leaves} ({reasons}): a turn that enters it goes "
                f"round until the loop guard or max_hops ({team.max_hops}) stops it"
            )
            back = cycle[-1]
            fix = (
                f"end the chain instead of closing it (remove `{back}: {cycle[0]}`, or route "
                f"'{back}' to `user`), or make a member decide (a rules agent with a `route`, an llm agent)"
            )
            escalating = [member for member in cycle if member in self.returning()]
            if escalating:
                fix += f", or give '{escalating[0]}' `on_done: escalate`"
            yield self._at(team, ("routes", back), problem, fix)

    def _unreached(self, team: TeamConfig, closed: set[str]) -> Iterator[Finding]:
        """Members no route leads to and no member can decide to send the turn to."""
        if team.default_agent in closed:
            return  # no turn starts at all: said once, above
        reached = self.reachable(team, closed)
        for member in team.members:
            if member in reached or member in closed:
                continue
            fix = (
                f"add a route to it (e.g. `routes: {{{team.default_agent}: {member}}}`) or a rules "
                f"`route: {member}`, or remove it from `members`"
            )
            if member in team.approval.members:
                problem = (
                    f"approval member '{member}' is unreachable: no route leads to it and no member can "
                    "decide to send the turn there, so its approval is never asked"
                )
                yield self._at(team, ("approval", "members", member), problem, fix)
            else:
                problem = (
                    f"member '{member}' is unreachable: no route leads to it and no member can decide "
                    "to send the turn there (only a caller naming it as the recipient reaches it)"
                )
                yield self._at(team, ("members", member), problem, fix)

    def reachable(self, team: TeamConfig, closed: set[str]) -> set[str]:
        """The members a turn that starts at the default agent can reach: by static routes and
        by the decisions members can make (a remote agent may decide, so it may name anyone)."""
        reached, pending = set(), [team.default_agent]
        while pending:
            member = pending.pop()
            if member in reached or member in closed or member not in team.members:
                continue
            reached.add(member)
            if member in team.routes:
                pending.append(team.routes[member])
            pending.extend(self.may_name(member, team))
        return reached

    def _at(self, team: TeamConfig, path: Sequence[str], problem: str, fix: str) -> Finding:
        return Finding(self.positions.line(team.id, path), team.id, problem, fix)


def closed_to_all(rule: MemberAccess) -> bool:
    """Whether an `access` rule admits no caller: every `allow` entry is also denied (an empty
    `allow` admits none), or every kind of caller is denied (docs/routing.md, "Access")."""
    if rule.allow is not None and set(rule.allow) <= set(rule.deny):
        return True
    return EVERY_KIND <= set(rule.deny) and rule.allow is not None


def route_cycles(team: TeamConfig) -> list[list[str]]:
    """Each cycle of `team`'s static routes once, in route order, starting at the default agent
    when it is on it. A member has one route, so following them from each member finds them all."""
    cycles: list[list[str]] = []
    seen: set[str] = set()
    for start in team.routes:
        path: list[str] = []
        member: str | None = start
        while member is not None and member not in seen and member not in path:
            path.append(member)
            member = team.routes.get(member)
        if member is not None and member in path:
            cycle = path[path.index(member) :]
            if team.default_agent in cycle:
                at = cycle.index(team.default_agent)
                cycle = cycle[at:] + cycle[:at]
            cycles.append(cycle)
        seen.update(path)
    return cycles


class Positions:
    """Lines of a config file's entries, from YAML's own node marks (1-based)."""

    def __init__(self, text: str) -> None:
        try:
            self.root: yaml.Node | None = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError:  # validated already; a file changed since is read as having no lines
            self.root = None

    def line(self, team_id: str, path: Sequence[str]) -> int:
        """The line of `path` (keys, or items of a list) inside team `team_id`'s entry: the deepest
        step found (a step that is not there is skipped, so `approval.members.x` also finds the
        short form `approval: [x]`); the team's own line, or 1, when none is."""
        node = self._team(team_id)
        if node is None:
            return 1
        mark = node.start_mark.line
        for step in path:
            found = _child(node, step)
            if found is None:
                continue
            key, node = found
            mark = key.start_mark.line
        return mark + 1

    def _team(self, team_id: str) -> yaml.Node | None:
        found = _child(self.root, "teams") if self.root is not None else None
        if found is None or not isinstance(found[1], yaml.SequenceNode):
            return None
        for entry in found[1].value:
            named = _child(entry, "id")
            if named is not None and named[1].value == team_id:
                return entry  # type: ignore[no-any-return]
        return None


def _child(node: yaml.Node, step: str) -> tuple[yaml.Node, yaml.Node] | None:
    """A mapping's (key, value) for key `step`, or a list's (item, item) equal to `step`."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == step:
                return key, value
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            if isinstance(item, yaml.ScalarNode) and item.value == step:
                return item, item
    return None
