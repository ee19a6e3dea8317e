"""An llm agent in a room hands work over with its `hand_off(agent, reason, message)` tool, waits,
and is woken with the other agent's answer; outside a room the tool is not offered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _support.fake_openai import FakeOpenAI, text, tool
from _support.hubkit import ADMIN_KEY, Api, events_of, send_text, serve_ranch, wait_until

CONFIG = """
agents:
  - id: helper
    kind: python
    entry: _support.probes:Probe
    options: {reply: "helper counted: {text}"}
"""


def tool_names(request: dict[str, Any]) -> list[str]:
    return [spec["function"]["name"] for spec in request.get("tools", [])]


def test_an_llm_agent_hands_off_and_is_woken_with_the_result(
    tmp_path: Path, fake: FakeOpenAI, base_url: str
) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        admin.post("/agents", {"id": "planner", "kind": "llm", "model": "planner", "base_url": base_url})
        participants = [{"kind": "agent", "id": "planner"}, {"kind": "agent", "id": "helper"}]
        room = admin.post("/rooms", {"title": "Plans", "participants": participants})["id"]
        fake.script(
            "planner",
            tool("hand_off", {"agent": "helper", "reason": "needs counting", "message": "count the rows"}),
            text("The helper says it is done."),
        )
        admin.post(f"/rooms/{room}/messages", {"text": "@planner how many rows?"})

        def woken_and_ready() -> dict[str, Any] | None:
            rows = [
                row for row in admin.get(f"/rooms/{room}/executions")["items"] if row["agent_id"] == "planner"
            ]
            return rows[0] if rows and rows[0]["status"] == "ready" and rows[0]["turns"] == 2 else None

        parent = wait_until(woken_and_ready, what="the planner woken with the helper's answer")
        child = admin.get(f"/executions/{parent['id']}")["children"][0]
        assert (child["agent_id"], child["status"]) == ("helper", "completed")

        first, second = fake.requests_for("planner")
        assert "hand_off" in tool_names(first)
        assert second["messages"][-1]["content"].endswith("helper counted: count the rows")
        spoken = [(m["sender"]["id"], m["type"], m["text"]) for m in admin.messages(room)]
        assert spoken == [
            ("admin", "text", "@planner how many rows?"),
            ("planner", "text", "count the rows"),
            ("helper", "text", "helper counted: count the rows"),
            ("planner", "text", "The helper says it is done."),
        ]
        statuses = [
            event["data"]["status"]
            for event in events_of(admin, room)
            if event["type"] == "execution.updated" and event["data"]["id"] == parent["id"]
        ]
        assert "handoff" in statuses and statuses[-1] == "ready"

        fake.script("planner", text("plain answer"))
        send_text(hub.agent_url("planner"), "no room here", "not-a-room", key=ADMIN_KEY)
        assert "hand_off" not in tool_names(fake.requests_for("planner")[-1])
