"""The page at `/`, end to end: a real `ranch serve` (the built-in demo) driven by Debian's chromium.

Playwright drives `/usr/bin/chromium` headless (`make browser` installs it; Playwright's own
browser download is never used). A missing chromium fails these tests; it never skips them.
The route diagram of a team turn is saved as `tests/artifacts/route.png`.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import (
    Browser,
    ConsoleMessage,
    FilePayload,
    Page,
    WebSocketRoute,
    expect,
)

from _support.servers import ServerProcess, free_port

ARTIFACTS = Path(__file__).parents[1] / "artifacts"
DEMO_KEY = "rk_demo"
TIMEOUT_MS = 10_000


@contextlib.contextmanager
def demo_server(folder: Path, *extra: str) -> Iterator[ServerProcess]:
    port = free_port()
    db = folder / "ranch.db"
    command = [
        sys.executable,
        "-m",
        "ranch",
        "serve",
        "--port",
        str(port),
        "--db",
        f"sqlite+aiosqlite:///{db}",
    ]
    with ServerProcess(
        [*command, *extra], port, log_path=db.with_suffix(".log"), name="ranch-serve"
    ) as server:
        yield server


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`ranch serve` with no config: the demo team, the user `demo` (key rk_demo) and the room `demo`."""
    with demo_server(tmp_path_factory.mktemp("web")) as server:
        yield server


def unexpected(message: ConsoleMessage) -> bool:
    """Console errors fail a test, except the browser's own note on a refused key (a 401 answer)."""
    return message.type == "error" and "status of 401" not in message.text


@contextlib.contextmanager
def open_page(browser: Browser, hub: ServerProcess, width: int = 1280, height: int = 900) -> Iterator[Page]:
    context = browser.new_context(base_url=hub.url, viewport={"width": width, "height": height})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    page.on("console", lambda msg: errors.append(f"console: {msg.text}") if unexpected(msg) else None)
    yield page
    context.close()
    assert errors == [], f"the page reported errors: {errors}"


@pytest.fixture
def page(browser: Browser, hub: ServerProcess) -> Iterator[Page]:
    with open_page(browser, hub) as opened:
        yield opened


@pytest.fixture
def phone(browser: Browser, hub: ServerProcess) -> Iterator[Page]:
    with open_page(browser, hub, width=390, height=844) as opened:
        yield opened


def sign_in(page: Page, key: str = DEMO_KEY, at: str = "/") -> None:
    page.goto(at)
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()


def topic() -> str:
    """A word no other test uses, so each test finds its own messages."""
    return f"topic{uuid.uuid4().hex[:8]}"


def test_sign_in_open_the_demo_room_and_watch_the_team_answer_live(
    page: Page, capsys: pytest.CaptureFixture[str]
) -> None:
    sign_in(page)
    expect(page.get_by_role("heading", name="Rooms", exact=True)).to_be_visible()
    page.get_by_role("link", name="Helpdesk demo").click()
    expect(page).to_have_url(re.compile(r"/rooms/demo$"))
    expect(page.get_by_role("heading", name="Helpdesk demo")).to_be_visible()
    expect(page.locator("#live-status")).to_have_text("Live")
    page.evaluate("window.sameDocument = true")  # gone if anything reloads the page

    subject = topic()
    composer = page.get_by_label("Message", exact=True)
    composer.fill(f"@helpdesk find papers on {subject}")
    page.get_by_role("button", name="Send").click()

    log = page.get_by_role("log")
    expect(log.locator(".msg--mine").filter(has_text=subject)).to_be_visible()
    expect(
        log.locator(".msg").filter(
            has_text=f"Here is what the team prepared. Research notes on 'find papers on {subject}'"
        )
    ).to_be_visible()
    figure = page.locator("figure.route").first
    expect(figure.locator(".route-text")).to_have_text("user → triage → researcher → triage → user")
    for reason in ("needs research", "findings ready", "specialist finished"):
        expect(figure.locator(".rd-reason", has_text=reason)).to_be_visible()
    expect(figure.locator(".rd-time").first).to_contain_text("ms")
    expect(page.locator(".chip[data-agent=helpdesk]")).to_have_attribute("data-status", "ready")
    assert page.evaluate("window.sameDocument") is True

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "route.png"
    figure.screenshot(path=str(shot))
    assert shot.stat().st_size > 1000
    with capsys.disabled():  # shown even when pytest captures output
        print(f"\nroute diagram screenshot: {shot}")


def test_a_refused_key_keeps_the_sign_in_form_and_the_key_lives_in_session_storage(page: Page) -> None:
    sign_in(page, key="rk_not_a_key")
    expect(page.get_by_role("alert")).to_have_text("The hub did not accept this key.")
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    expect(page.get_by_role("navigation", name="Main")).to_be_hidden()
    expect(page.get_by_label("API key")).to_be_focused()
    assert page.evaluate("sessionStorage.length") == 0

    page.get_by_label("API key").fill(DEMO_KEY)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Rooms", exact=True)).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('ranch.apiKey')") == DEMO_KEY
    assert page.evaluate("localStorage.length") == 0

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    assert page.evaluate("sessionStorage.length") == 0


def test_keyboard_only_mention_completion_and_enter_sends(page: Page) -> None:
    sign_in(page, at="/rooms/demo")  # a deep link survives the sign-in
    expect(page.get_by_role("heading", name="Helpdesk demo")).to_be_visible()
    expect(page.locator("#live-status")).to_have_text("Live")

    for _ in range(40):
        if page.evaluate("document.activeElement?.id") == "composer-input":
            break
        page.keyboard.press("Tab")
    composer = page.get_by_label("Message", exact=True)
    expect(composer).to_be_focused()
    assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"

    page.keyboard.type("@hel")
    options = page.get_by_role("listbox", name="Mention suggestions").get_by_role("option")
    expect(options).to_have_count(1)
    expect(options.first).to_contain_text("@helpdesk")
    expect(options.first).to_have_attribute("aria-selected", "true")
    page.keyboard.press("Escape")
    expect(page.get_by_role("listbox")).to_be_hidden()
    page.keyboard.type("p")  # typing on reopens the list
    expect(options.first).to_be_visible()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Tab")
    expect(composer).to_have_value("@helpdesk ")
    expect(composer).to_be_focused()

    subject = topic()
    page.keyboard.type(f"write a note about {subject}")
    page.keyboard.press("Enter")
    expect(composer).to_have_value("")
    log = page.get_by_role("log")
    expect(log.locator(".msg--mine").filter(has_text=subject).locator(".mention")).to_have_text("@helpdesk")
    expect(
        log.locator(".msg").filter(has_text=f"Draft: a short text for 'write a note about {subject}'").first
    ).to_be_visible()
    expect(page.locator("figure.route").first.locator(".route-text")).to_have_text(
        "user → triage → writer → triage → user"
    )


def open_echo_room(page: Page, title: str) -> None:
    """Sign in and open a new room whose default agent is echo, live."""
    sign_in(page)
    page.get_by_label("Title").fill(title)
    page.get_by_label("Default agent").select_option("echo")
    page.get_by_role("button", name="Open room").click()
    expect(page.get_by_role("heading", name=title)).to_be_visible()
    expect(page.locator("#live-status")).to_have_text("Live")


def test_open_a_room_whose_default_agent_answers_unmentioned_messages(page: Page) -> None:
    title = f"Echo {topic()}"
    open_echo_room(page, title)

    subject = topic()
    page.get_by_label("Message", exact=True).fill(f"hello {subject}")
    page.keyboard.press("Enter")
    reply = page.get_by_role("log").locator(".msg--from-agent").filter(has_text=subject)
    expect(reply.locator(".msg-who")).to_have_text("Echo")
    expect(page.locator(".chip[data-agent=echo]")).to_have_attribute("data-status", "ready")
    page.get_by_role("link", name="Rooms").click()
    expect(page.get_by_role("link", name=title)).to_be_visible()


def test_a_room_session_that_expired_while_idle_is_renewed_without_signing_out(
    browser: Browser, tmp_path: Path
) -> None:
    with demo_server(tmp_path, "--session-ttl", "1") as short, open_page(browser, short) as page:
        sign_in(page, at="/rooms/demo")
        expect(page.locator("#live-status")).to_have_text("Live")
        composer = page.get_by_label("Message", exact=True)
        first = topic()
        composer.fill(f"@helpdesk find papers on {first}")
        composer.press("Enter")
        log = page.get_by_role("log")
        expect(
            log.locator(".msg").filter(has_text=f"Research notes on 'find papers on {first}'")
        ).to_have_count(2)
        page.wait_for_timeout(1500)  # idle past the session's TTL: the next post meets SESSION_EXPIRED
        second = topic()
        composer.fill(f"@helpdesk find papers on {second}")
        with page.expect_response(lambda r: r.request.method == "POST" and r.status == 401) as refused:
            composer.press("Enter")
        assert refused.value.json()["error"]["code"] == "SESSION_EXPIRED"
        expect(
            log.locator(".msg").filter(has_text=f"Research notes on 'find papers on {second}'")
        ).to_have_count(2)
        expect(page.get_by_role("heading", name="Helpdesk demo")).to_be_visible()  # still signed in


def test_an_agent_page_shows_its_card_skills_and_the_client_routing_extension(page: Page) -> None:
    sign_in(page, at="/agents/helpdesk")
    expect(page.get_by_role("heading", name="Helpdesk", exact=True)).to_be_visible()
    members = page.get_by_role("region", name="Members")
    expect(members.get_by_role("link")).to_have_text(["@triage", "@researcher", "@writer"])
    members.get_by_role("link", name="@researcher").click()

    expect(page).to_have_url(re.compile(r"/agents/researcher$"))
    expect(page.get_by_role("heading", name="Researcher", exact=True)).to_be_visible()
    expect(page.get_by_text("Finds sources and summarises them", exact=True)).to_be_visible()
    skills = page.get_by_role("region", name="Skills")
    expect(skills.get_by_role("heading", name="research")).to_be_visible()
    expect(skills.get_by_role("list", name="Tags").get_by_role("listitem")).to_have_text(
        ["search", "summarize"]
    )
    interfaces = page.get_by_role("region", name="Interfaces").locator("tbody tr")
    expect(interfaces).to_have_count(6)  # its own URL in A2A 1.0 and 0.3, and /a2a with its tenant
    expect(interfaces.first).to_contain_text("JSONRPC")
    expect(interfaces.last).to_contain_text("researcher")
    routing = page.locator(".extension--routing")
    expect(routing).to_contain_text("Client routing")
    expect(routing).to_contain_text("https://ranch.woi.dev/extensions/client-routing/v1")
    expect(page.get_by_role("region", name="Capabilities")).to_contain_text("Streaming")

    page.reload()  # a deep link, signed in: the same page again
    expect(page.get_by_role("heading", name="Researcher", exact=True)).to_be_visible()


def test_the_page_reconnects_with_its_last_cursor_and_misses_nothing(page: Page, hub: ServerProcess) -> None:
    sign_in(page, at="/rooms/demo")
    expect(page.locator("#live-status")).to_have_text("Live")
    page.evaluate("window.ranchLive.ws.close()")  # as if the network dropped
    expect(page.locator("#live-status")).to_have_text("Reconnecting…")

    subject = topic()
    with httpx.Client(base_url=hub.url, headers={"X-API-Key": DEMO_KEY}, trust_env=False) as client:
        response = client.post("/api/v1/rooms/demo/messages", json={"text": f"posted while away: {subject}"})
        assert response.status_code == 201, response.text
        newest = client.get("/api/v1/rooms/demo/events", params={"before": 2**63 - 1, "limit": 50}).json()
    posted = next(e["cursor"] for e in newest["items"] if subject in str(e["data"].get("text")))

    expect(page.locator("#live-status")).to_have_text("Live")
    expect(page.get_by_role("log").locator(".msg").filter(has_text=subject)).to_have_count(1)
    cursors = page.evaluate("window.ranchLive.cursors")  # the room's own cursor, where a reconnect resumes
    assert list(cursors) == ["demo"] and cursors["demo"] >= posted


def live_demo_room(page: Page) -> WebSocketRoute:
    """Sign in on the demo room with its WebSocket passing through the test, which may add frames."""
    sockets: list[WebSocketRoute] = []

    def through(ws: WebSocketRoute) -> None:
        ws.connect_to_server()
        sockets.append(ws)

    page.route_web_socket(re.compile(r"/api/v1/ws"), through)
    sign_in(page, at="/rooms/demo")
    expect(page.locator("#live-status")).to_have_text("Live")
    return sockets[-1]


def test_streamed_text_tool_calls_and_failures_are_drawn_as_they_arrive(page: Page) -> None:
    """Frames the demo's rules agents never send, injected into the real WebSocket."""
    ws = live_demo_room(page)
    execution = str(uuid.uuid4())
    subject = topic()

    def send(kind: str, data: dict[str, Any], cursor: int | None = None) -> None:
        frame: dict[str, Any] = {"type": kind, "room_id": "demo", "at": "2026-01-01T00:00:00Z", "data": data}
        if cursor is not None:
            frame["cursor"] = cursor
        ws.send(json.dumps(frame))

    log = page.get_by_role("log")
    send("message.delta", {"execution_id": execution, "agent": "researcher", "text": f"Reading {subject} "})
    bubble = log.locator(".msg--streaming")
    expect(bubble).to_have_text(re.compile(f"Reading {subject}"))
    expect(bubble).to_have_attribute("aria-busy", "true")
    send(
        "message.delta",
        {"execution_id": execution, "agent": "researcher", "text": "and more", "append": True},
    )
    expect(bubble.locator(".msg-text")).to_have_text(f"Reading {subject} and more")
    whole = f"Reading {subject} and more, whole."
    send("message.delta", {"execution_id": execution, "agent": "researcher", "text": whole, "append": False})
    expect(bubble.locator(".msg-text")).to_have_text(whole)  # the whole answer replaces its pieces

    final = {
        "id": str(uuid.uuid4()),
        "cursor": 900_001,
        "room_id": "demo",
        "type": "text",
        "sender": {"kind": "agent", "id": "researcher"},
        "text": f"Reading {subject} and more, done.",
        "mentions": [],
        "metadata": {},
        "thread_id": None,
        "execution_id": execution,
        "created_at": "2026-01-01T00:00:01Z",
    }
    send("message.created", final, cursor=10_000_001)
    expect(log.locator(".msg--streaming")).to_have_count(0)
    expect(log.locator(".msg").filter(has_text=subject)).to_have_count(1)

    for n, kind in enumerate(("tool_call", "tool_result")):
        tool = {
            **final,
            "id": str(uuid.uuid4()),
            "type": kind,
            "text": f"{kind} for {subject}",
            "metadata": {"tool": "search"},
        }
        send("message.created", tool, cursor=10_000_002 + n)
    group = log.locator(".tool-group").last
    summary = group.locator("summary")
    expect(summary).to_have_text("Researcher used tools · 2 steps")
    expect(group.get_by_text(f"tool_result for {subject}")).to_be_hidden()
    summary.focus()
    page.keyboard.press("Enter")
    expect(group.get_by_text(f"tool_result for {subject}")).to_be_visible()

    send(
        "execution.updated",
        {
            "id": str(uuid.uuid4()),
            "room_id": "demo",
            "agent_id": "writer",
            "status": "failed",
            "reason": "the model timed out",
            "turns": 1,
            "tool_calls": [],
            "created_at": "2026-01-01T00:00:00Z",
            "updated_at": "2026-01-01T00:00:02Z",
        },
        cursor=10_000_010,
    )
    chip = page.locator(".chip[data-agent=writer]")
    expect(chip).to_have_attribute("data-status", "failed")
    expect(chip).to_contain_text("the model timed out")


def test_a_key_the_websocket_refuses_ends_the_session(page: Page) -> None:
    ws = live_demo_room(page)
    error = {"code": "UNAUTHENTICATED", "message": "this key was revoked", "field": None}
    ws.send(json.dumps({"type": "error", "error": error}))
    expect(page.get_by_role("alert")).to_have_text("The hub no longer accepts this key. Sign in again.")
    assert page.evaluate("sessionStorage.length") == 0
    page.get_by_label("API key").fill(DEMO_KEY)
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/rooms/demo$"))  # back where the session ended


def assert_no_horizontal_scroll(page: Page) -> None:
    widths = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"the page scrolls sideways at {widths[1]} px: {widths[0]} px wide"


def test_at_a_phones_width_nothing_scrolls_sideways(phone: Page) -> None:
    sign_in(phone)
    expect(phone.get_by_role("heading", name="Rooms", exact=True)).to_be_visible()
    assert_no_horizontal_scroll(phone)

    phone.get_by_role("link", name="Helpdesk demo").click()
    expect(phone.locator("#live-status")).to_have_text("Live")
    subject = topic()
    phone.get_by_label("Message", exact=True).fill(f"@helpdesk find papers on {subject}")
    phone.get_by_role("button", name="Send").click()
    expect(
        phone.get_by_role("log")
        .locator(".msg")
        .filter(has_text=f"Research notes on 'find papers on {subject}'")
        .first
    ).to_be_visible()
    expect(phone.locator("figure.route").first.locator(".route-text")).to_have_text(
        "user → triage → researcher → triage → user"
    )
    send_box = phone.get_by_role("button", name="Send").bounding_box()
    assert send_box is not None and send_box["x"] + send_box["width"] <= 390
    diagram = phone.locator("figure.route svg").first.bounding_box()
    assert diagram is not None and diagram["width"] <= 390
    assert_no_horizontal_scroll(phone)

    phone.set_viewport_size({"width": 360, "height": 740})
    assert_no_horizontal_scroll(phone)
    phone.goto("/agents/triage")
    expect(phone.get_by_role("heading", name="Triage", exact=True)).to_be_visible()
    assert_no_horizontal_scroll(phone)


def test_each_team_turn_shows_its_trace_id_linked_to_the_trace_viewer(
    browser: Browser, tmp_path: Path
) -> None:
    viewer = "http://127.0.0.1:16686/trace/{trace_id}"
    with demo_server(tmp_path, "--trace-url", viewer) as server, open_page(browser, server) as page:
        sign_in(page)
        page.get_by_role("link", name="Helpdesk demo").click()
        expect(page.locator("#live-status")).to_have_text("Live")
        page.get_by_label("Message", exact=True).fill(f"@helpdesk find papers on {topic()}")
        page.get_by_role("button", name="Send").click()
        figure = page.locator("figure.route").first
        expect(figure.locator(".route-text")).to_have_text("user → triage → researcher → triage → user")
        link = figure.locator("a.route-trace")
        expect(link).to_have_text(re.compile(r"^trace [0-9a-f]{32}$"))
        trace_id = link.inner_text().split()[1]
        assert link.get_attribute("href") == viewer.replace("{trace_id}", trace_id)
        # the same trace id labels the server's log lines of the request that posted the message
        assert trace_id in server.output()


def test_the_agent_list_finds_agents_by_skill_and_tag(page: Page) -> None:
    sign_in(page, at="/agents")
    cards = page.locator("li.card h3")
    expect(cards.filter(has_text="Researcher")).to_have_count(1)
    everything = cards.count()
    page.get_by_label("Skill").fill("RESEARCH")
    page.get_by_role("button", name="Find").click()
    expect(page.locator("section[aria-labelledby=group-agents] li.card h3")).to_have_text(["Researcher"])
    assert cards.count() < everything  # the team that has the researcher lists the skill too
    page.get_by_label("Skill").fill("")
    page.get_by_label("Tag").fill("write")
    page.get_by_role("button", name="Find").click()
    expect(page.locator("section[aria-labelledby=group-agents] li.card h3")).to_have_text(["Writer"])
    page.get_by_label("Tag").fill("nothing-has-this")
    page.get_by_role("button", name="Find").click()
    expect(page.get_by_role("status")).to_have_text("No agent or team matches.")
    expect(cards).to_have_count(0)


# an image's width once its bytes have loaded (0 if they were not an image)
LOADED_WIDTH = """img => img.complete ? img.naturalWidth : new Promise((done) => {
  img.addEventListener("load", () => done(img.naturalWidth), { once: true });
  img.addEventListener("error", () => done(0), { once: true });
})"""

PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


def test_attach_a_file_and_see_files_and_data_in_the_room(page: Page, hub: ServerProcess) -> None:
    open_echo_room(page, f"Files {topic()}")

    pixel: FilePayload = {"name": "dot.png", "mimeType": "image/png", "buffer": base64.b64decode(PIXEL)}
    page.get_by_label("Attach a file").set_input_files(files=[pixel])
    expect(page.locator(".attached")).to_have_text("Attached: dot.png (70 B)")
    page.get_by_label("Message", exact=True).fill("a picture")
    page.get_by_role("button", name="Send").click()

    log = page.get_by_role("log")
    mine = log.locator(".msg--mine").filter(has_text="a picture")
    expect(mine.locator("img[alt='dot.png']")).to_be_visible()
    expect(mine.get_by_role("link", name="dot.png")).to_have_attribute("download", "dot.png")
    expect(page.locator(".attached")).to_have_text("")
    echoed = log.locator(".msg--from-agent").filter(has_text="a picture")
    expect(echoed.locator("img[alt='dot.png']")).to_be_visible()  # echo answered with the file it got
    # the page fetches the bytes from the hub with the key, then shows them: wait for that, not for time
    expect(echoed.locator("img")).to_have_attribute("src", re.compile(r"^blob:"))
    assert echoed.locator("img").evaluate(LOADED_WIDTH) == 1  # the bytes came back whole: a 1x1 PNG
    expect(mine.locator("img")).to_have_attribute("src", re.compile(r"^blob:"))
    expect(mine.locator("figcaption")).to_contain_text("image/png, 70 B")
    with page.expect_download() as saved:
        mine.get_by_role("link", name="dot.png").click()
    assert Path(saved.value.path()).read_bytes() == base64.b64decode(PIXEL)

    room = page.url.rsplit("/", 1)[-1]
    posted = httpx.post(
        f"{hub.url}/api/v1/rooms/{room}/messages",
        json={
            "parts": [
                {"data": {"order": 42}},
                {"url": "https://files.example/r.pdf", "mediaType": "application/pdf"},
            ]
        },
        headers={"X-API-Key": DEMO_KEY},
        timeout=10,
    )
    assert posted.status_code == 201, posted.text
    item = log.locator(f".msg[data-id='{posted.json()['id']}']")
    data = item.locator("details.msg-data")
    expect(data).not_to_have_attribute("open", "")
    data.locator("summary").click()
    expect(data.locator("pre")).to_contain_text('"order": 42')
    expect(item.get_by_role("link", name="r.pdf")).to_have_attribute("href", "https://files.example/r.pdf")


def test_a_member_teams_hops_and_a_loop_show_in_the_route(page: Page) -> None:
    """`routing.decided` frames of a team whose member is a team (its hops nested) and whose loop
    guard redirected a hop, injected into the real WebSocket."""
    ws = live_demo_room(page)
    execution = str(uuid.uuid4())
    inner = [
        {"agent": "a1", "sender": "user", "recipient": "a2", "reason": "to a2", "ms": 1.0},
        {"agent": "a2", "sender": "a1", "recipient": "user", "reason": "done", "ms": 1.0},
    ]
    hops = [
        {"agent": "desk", "sender": "user", "recipient": "far", "reason": "far knows", "hop": 1},
        {"agent": "far", "sender": "desk", "recipient": "desk", "reason": "loop: far -> desk x3", "hop": 2,
         "loop": True, "trail": inner},
        {"agent": "desk", "sender": "far", "recipient": "user", "reason": "answered", "hop": 3},
    ]  # fmt: skip
    for n, hop in enumerate(hops):
        data = {"team": "outer", "execution_id": execution, "ms": 2.0, **hop}
        frame = {
            "type": "routing.decided",
            "room_id": "demo",
            "cursor": 20_000_000 + n,
            "at": None,
            "data": data,
        }
        ws.send(json.dumps(frame))
    figure = page.locator(f"figure.route[data-execution='{execution}']")
    expect(figure.locator(".route-text")).to_have_text("user → desk → far [a1 → a2] → desk → user")
    expect(figure.locator(".rd-reason", has_text="⟲ loop: far -> desk x3 [a1 → a2]")).to_have_count(1)


APPROVAL_CONFIG = """
agents:
  - {id: desk, kind: rules, rules: [{reply: "desk routes", route: finance, reason: "money question"}]}
  - {id: finance, kind: rules, rules: [{reply: "finance answers", route: user, reason: "done"}]}
teams:
  - {id: office, members: [desk, finance], default_agent: desk, approval: [finance]}
"""
OFFICE_KEY = "rk_office_admin_key_0123456789"


def test_a_person_approves_a_hop_from_the_room(browser: Browser, tmp_path: Path) -> None:
    config = tmp_path / "office.yaml"
    config.write_text(APPROVAL_CONFIG)
    port = free_port()
    command = [sys.executable, "-m", "ranch", "serve", str(config), "--port", str(port),
               "--db", f"sqlite+aiosqlite:///{tmp_path / 'office.db'}"]  # fmt: skip
    env = {**os.environ, "RANCH_ADMIN_KEY": OFFICE_KEY}
    with ServerProcess(command, port, env=env, log_path=tmp_path / "office.log", name="office") as server:
        room = httpx.post(
            f"{server.url}/api/v1/rooms",
            json={"id": "office-room", "title": "Office", "participants": [{"kind": "team", "id": "office"}]},
            headers={"X-API-Key": OFFICE_KEY},
            timeout=10,
        )
        assert room.status_code == 201, room.text
        with open_page(browser, server) as page:
            sign_in(page, OFFICE_KEY, at="/rooms/office-room")
            expect(page.locator("#live-status")).to_have_text("Live")
            page.get_by_label("Message", exact=True).fill("@office how much is left?")
            page.get_by_role("button", name="Send").click()
            log = page.get_by_role("log")
            asked = log.locator(".msg").filter(has_text="Approve sending this to finance?")
            expect(asked).to_contain_text("Why: money question")
            asked.get_by_role("button", name="Approve").click()
            expect(log.locator(".msg--from-agent").filter(has_text="finance answers")).to_be_visible()
            expect(asked.get_by_role("button", name="Approve")).to_be_disabled()
