"""The room's page shows handoffs (issue 31), in Debian's chromium: an agent waiting on the agent it
handed work to is `handoff` on its status chip with the child's agent and status beneath it, the
child's chip says whose work it does, and both follow the child to its end, live.
"""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Browser, expect

from _support.hubkit import ADMIN_KEY, Api, serve_ranch, wait_until

CONFIG = """
agents:
  - id: lead
    kind: python
    entry: _support.handoffs:Handing
    options: {to: napper, reason: "slow work", done: true}
  - id: napper
    kind: python
    entry: _support.probes:Probe
    options: {sleep: 30, reply: "too late"}
"""


def test_the_page_shows_an_agent_waiting_on_its_handoff(browser: Browser, tmp_path: Path) -> None:
    with serve_ranch(CONFIG, tmp_path / "hub.db") as hub:
        admin = Api(hub.url, ADMIN_KEY)
        participants = [{"kind": "agent", "id": "lead"}, {"kind": "agent", "id": "napper"}]
        room = admin.post("/rooms", {"id": "handoffs", "title": "Handoffs", "participants": participants})[
            "id"
        ]
        context = browser.new_context(base_url=hub.url, viewport={"width": 1280, "height": 900})
        context.set_default_timeout(10_000)
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(f"/rooms/{room}")
        page.get_by_label("API key").fill(ADMIN_KEY)
        page.get_by_role("button", name="Sign in").click()
        expect(page.locator("#live-status")).to_have_text("Live")

        page.get_by_label("Message", exact=True).fill("@lead take your time")
        page.get_by_role("button", name="Send").click()
        lead = page.locator(".chip[data-agent=lead]")
        expect(lead).to_have_attribute("data-status", "handoff")
        expect(lead.locator(".chip-mark")).to_have_text("⇢")
        waiting_on = lead.get_by_role("list", name="handed off to").locator("li")
        expect(waiting_on).to_have_text(["napper · working"])
        napper = page.locator(".chip[data-agent=napper]")
        expect(napper).to_have_attribute("data-status", "working")
        expect(napper.locator(".chip-for")).to_have_text("for lead")

        page.reload()  # drawn from the REST reads as well as live
        expect(lead.get_by_role("list", name="handed off to").locator("li")).to_have_text(
            ["napper · working"]
        )

        child = wait_until(lambda: admin.executions(room)["napper"]["id"])
        admin.post(f"/executions/{child}/cancel", None, status=200)
        expect(napper).to_have_attribute("data-status", "canceled")
        expect(lead).to_have_attribute("data-status", "completed")
        expect(lead.get_by_role("list", name="handed off to")).to_have_count(0)
        expect(
            page.get_by_role("log").locator(".msg").filter(has_text="the handoff to napper canceled")
        ).to_have_count(2)
        context.close()
        assert errors == []
