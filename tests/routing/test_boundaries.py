"""Routing across boundaries (docs/routing.md, "Teams of teams" and "Loops"): a team that is a
member of another, over HTTP between two ranch servers, keeps to the outer hop budget, shows its
hops nested in the outer trail and passes its decision outward; a loop between members is stopped
as the team's `on_loop` says."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
from a2a.types import Message, Part, Role, Task, TaskState
from google.protobuf.json_format import MessageToDict

from _support.hubkit import serve_ranch
from _support.sdk import sdk_client, send
from ranch.wire.client_routing import URI

INNER = """
agents:
  - {id: a1, kind: rules, rules: [{reply: "a1 read it", route: a2, reason: "to a2"}]}
  - {id: c1, kind: rules, rules: [{reply: "c1 read it", route: b2, reason: "to b2"}]}
  - {id: a2, kind: rules, rules: [{reply: "a2 checked it", route: a3, reason: "to a3"}]}
  - {id: a3, kind: rules, rules: [{reply: "a3 answers", route: user, reason: "a3 is done"}]}
  - {id: b2, kind: rules, rules: [{reply: "b2 checked it", route: b3, reason: "to b3"}]}
  - {id: b3, kind: rules, rules: [{reply: "b3 hands over", route: writer, reason: "the writer finishes"}]}
  - {id: writer, kind: echo}  # served here too, but no member of inner-out: the name is the caller's peer
  - {id: near, kind: rules, rules: [{reply: "near passes it on", route: inner, reason: "inner knows"}]}
teams:
  - {id: inner, members: [a1, a2, a3], default_agent: a1}
  - {id: inner-out, members: [c1, b2, b3], default_agent: c1}
  - {id: tight-here, members: [near, inner], default_agent: near, max_hops: 3}
  - {id: roomy-here, members: [near, inner], default_agent: near, max_hops: 4}
"""


def outer(inner_url: str, inner_out_url: str) -> str:
    return f"""
agents:
  - {{id: desk, kind: rules, rules: [{{reply: "desk passes it on", route: far, reason: "far knows"}}]}}
  - {{id: desk-out, kind: rules, rules: [{{reply: "desk passes it on", route: far-out, reason: "far"}}]}}
  - {{id: writer, kind: rules, rules: [{{reply: "writer wrote it", route: user, reason: "written"}}]}}
  - {{id: far, kind: remote, url: "{inner_url}", timeout: 10}}
  - {{id: far-out, kind: remote, url: "{inner_out_url}", timeout: 10}}
teams:
  - {{id: tight, members: [desk, far], default_agent: desk, max_hops: 3}}
  - {{id: roomy, members: [desk, far, writer], default_agent: desk, max_hops: 10}}
  - {{id: outward, members: [desk-out, far-out, writer], default_agent: desk-out, max_hops: 10}}
"""


def ask(url: str, text: str) -> Task:
    async def go() -> Task:
        message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])
        async with sdk_client(url) as client:
            (answer,) = await send(client, message)
        return answer.task

    return anyio.run(go)


def routing(task: Task) -> dict[str, Any]:
    return dict(MessageToDict(task.metadata)[URI])


def final_text(task: Task) -> str:
    return "\n".join(part.text for part in task.status.message.parts)


def test_a_team_of_a_remote_team_keeps_the_outer_budget_nests_the_trail_and_takes_its_decision(
    tmp_path: Path,
) -> None:
    with serve_ranch(INNER, tmp_path / "a.db") as a:
        config = outer(a.agent_url("inner"), a.agent_url("inner-out"))
        with serve_ranch(config, tmp_path / "b.db") as b:
            # the inner team decided `user`: the outer turn ends there, not back at its default agent
            roomy = ask(b.agent_url("roomy"), "hello")
            assert roomy.status.state == TaskState.TASK_STATE_COMPLETED, final_text(roomy)
            data = routing(roomy)
            assert [hop["agent"] for hop in data["trail"]] == ["desk", "far"]
            far = data["trail"][1]
            assert (far["recipient"], far["reason"]) == ("user", "a3 is done")
            assert [hop["agent"] for hop in far["trail"]] == ["a1", "a2", "a3"]  # nested, from server A
            assert data["hops"] == 4  # the far hop counts as the three made inside it
            assert final_text(roomy) == "a3 answers"

            # the inner team's last member named a peer of the outer team: the outer Router goes there
            out = ask(b.agent_url("outward"), "hello")
            assert out.status.state == TaskState.TASK_STATE_COMPLETED, final_text(out)
            trail = routing(out)["trail"]
            assert [hop["agent"] for hop in trail] == ["desk-out", "far-out", "writer"]
            assert (trail[1]["recipient"], trail[1]["reason"]) == ("writer", "the writer finishes")
            assert [hop["agent"] for hop in trail[1]["trail"]] == ["c1", "b2", "b3"]

            # max_hops 3 outside: after desk, the inner team had 2 left, not its own 10
            tight = ask(b.agent_url("tight"), "hello")
            assert tight.status.state == TaskState.TASK_STATE_FAILED
            said = final_text(tight)
            assert "team 'inner' reached its hop limit (the 2 hops its caller had left)" in said
            assert "a1 -> a2 -> a3" in said

            # the same in one server: a team whose member is a team of the same config
            local = ask(a.agent_url("tight-here"), "hello")
            assert local.status.state == TaskState.TASK_STATE_FAILED
            assert "team 'inner' reached its hop limit (the 2 hops its caller had left)" in final_text(local)
            exact = ask(a.agent_url("roomy-here"), "hello")  # 1 + 3 hops: exactly the outer budget of 4
            assert exact.status.state == TaskState.TASK_STATE_COMPLETED, final_text(exact)
            assert routing(exact)["hops"] == 4

            printed = subprocess.run(
                [sys.executable, "-m", "ranch", "send", "roomy", "hello", "--url", b.url],
                capture_output=True, text=True, timeout=60, check=False,
            )  # fmt: skip
            assert printed.returncode == 0, printed.stderr
            assert "route: user -> desk -> far [a1 -> a2 -> a3] -> user" in printed.stdout


LOOPS = """
agents:
  - {id: host, kind: rules, rules: [{reply: "host starts again", route: ping, reason: "ping first"}]}
  - {id: ping, kind: rules, rules: [{reply: "over to pong", route: pong, reason: "pong's turn"}]}
  - {id: pong, kind: rules, rules: [{reply: "back to ping", route: ping, reason: "ping's turn"}]}
teams:
  - {id: bouncy, members: [host, ping, pong], default_agent: host, max_hops: 20}
  - {id: curt, members: [host, ping, pong], default_agent: host, max_hops: 20, on_loop: user}
  - {id: strict, members: [host, ping, pong], default_agent: host, max_hops: 20, on_loop: fail}
"""


def test_a_loop_goes_to_the_default_agent_once_then_to_the_user(tmp_path: Path) -> None:
    with serve_ranch(LOOPS, tmp_path / "l.db") as hub:
        task = ask(hub.agent_url("bouncy"), "play")
        assert task.status.state == TaskState.TASK_STATE_COMPLETED, final_text(task)
        trail = routing(task)["trail"]
        loops = [hop for hop in trail if hop.get("loop")]
        assert [(hop["agent"], hop["recipient"]) for hop in loops] == [("ping", "host"), ("ping", "user")]
        assert loops[0]["reason"] == "loop: ping -> pong x3"
        assert "[ranch] ping -> pong came 3 times with the same text; the turn ended." in final_text(task)
        assert len(trail) == 12  # host, then ping/pong x5, host again, ping/pong x5: never the hop limit

        curt = ask(hub.agent_url("curt"), "play")
        assert curt.status.state == TaskState.TASK_STATE_COMPLETED
        assert [hop["recipient"] for hop in routing(curt)["trail"]][-1] == "user"
        assert len(routing(curt)["trail"]) == 6

        strict = ask(hub.agent_url("strict"), "play")
        assert strict.status.state == TaskState.TASK_STATE_FAILED
        assert routing(strict)["error"]["type"] == "RoutingLoop"
        assert "ping -> pong came 3 times with the same text (on_loop: fail)" in final_text(strict)
