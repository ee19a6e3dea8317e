"""The page's "Replay against…": a team turn in a room replayed on a config the server offers, the
recorded and the new sequence diagrams side by side with the first divergent hop marked. Debian's
chromium (as tests/web/test_web_page.py) against an in-process hub (tests/replay/offered.py); the
comparison is saved as `tests/artifacts/replay.png`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, expect

from _support.hubkit import ADMIN_KEY, Api, RunningRanch, serve_ranch, wait_until
from replay.offered import ROOM, TEAM, Offering, offering

ARTIFACTS = Path(__file__).parents[1] / "artifacts"
OLD_ROUTE = "user → triage → researcher → triage → user"
NEW_ROUTE = "user → triage → researcher → triage → editor → user"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Offering]:
    with offering(tmp_path_factory.mktemp("web-replay")) as served:
        yield served


@contextlib.contextmanager
def room_page(browser: Browser, url: str, key: str = ADMIN_KEY, refused: int | None = None) -> Iterator[Page]:
    """The room ROOM, signed in with `key` (the admin's); any page error fails the test, but the
    browser's note on an answer with the status `refused` (a test that provokes one)."""
    context = browser.new_context(base_url=url, viewport={"width": 1400, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(f"uncaught: {error}"))
    expected = f"status of {refused} " if refused else None

    def console(message: ConsoleMessage) -> None:
        if message.type == "error" and not (expected and expected in message.text):
            errors.append(message.text)

    page.on("console", console)
    page.goto(f"/rooms/{ROOM}")
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("figure.route .route-text").first).to_have_text(OLD_ROUTE)
    yield page
    context.close()
    assert errors == [], f"the page reported errors: {errors}"


def test_a_turn_replayed_on_a_changed_config_shows_both_diagrams_and_where_they_part(
    browser: Browser, hub: Offering, capsys: pytest.CaptureFixture[str]
) -> None:
    with room_page(browser, hub.ranch.url, refused=422) as page:  # the broken config, at the end
        figure = page.locator("figure.route").first
        figure.get_by_text("Replay against…").click()
        expect(figure.get_by_label("Config")).to_have_value("editor")
        figure.get_by_role("button", name="Replay").click()

        dialog = page.get_by_role("dialog", name="Turn of desk replayed on editor")
        expect(dialog).to_be_visible()
        old, new = (
            dialog.locator(".replay-side[data-side=old]"),
            dialog.locator(".replay-side[data-side=new]"),
        )
        expect(old.locator(".route-text")).to_have_text(OLD_ROUTE)
        expect(new.locator(".route-text")).to_have_text(NEW_ROUTE)
        expect(dialog.locator(".replay-divergence")).to_contain_text(
            "diverged at hop 3: triage now passes to editor (was user)"
        )
        for side in (old, new):  # the first divergent hop is marked in both diagrams, and said
            expect(side.locator("g.rd-hop--diverged")).to_have_count(1)
            expect(side.locator("g.rd-hop--diverged")).to_have_attribute("data-hop", "3")
            expect(side.locator("figcaption")).to_contain_text("parts at hop 3")
        expect(dialog.locator(".replay-calls")).to_have_text(
            "called: triage, editor · recorded answers given back: researcher"
        )
        left, right = old.bounding_box(), new.bounding_box()
        assert left and right and left["x"] + left["width"] <= right["x"] and abs(left["y"] - right["y"]) < 2

        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "replay.png"
        dialog.screenshot(path=str(shot))
        with capsys.disabled():
            print(f"\nreplay comparison screenshot: {shot}")
        dialog.get_by_role("button", name="Close").click()
        expect(page.get_by_role("dialog")).to_have_count(0)

        figure.get_by_label("Config").select_option("broken")
        figure.get_by_role("button", name="Replay").click()
        expect(figure.get_by_role("alert")).to_contain_text("replay config 'broken' fails `ranch check`")


def test_only_the_newest_turn_of_an_execution_carries_the_control(browser: Browser, hub: Offering) -> None:
    """The hub replays an execution's last turn: an older turn's figure offers nothing."""
    with room_page(browser, hub.ranch.url) as page:
        hub.admin.post(f"/rooms/{ROOM}/messages", {"text": "@desk more papers on lichen"})
        figures = page.locator("figure.route")
        expect(figures).to_have_count(2)
        expect(figures.first.locator(".route-text")).to_have_text(OLD_ROUTE)  # the newest, drawn first
        expect(figures.first.get_by_text("Replay against…")).to_be_visible()
        expect(figures.nth(1).locator(".route-replay")).to_have_count(0)


def test_a_member_is_offered_no_replay(browser: Browser, hub: Offering) -> None:
    made = hub.admin.post("/users", {"id": "plain", "name": "Plain", "role": "member"})
    hub.admin.post(f"/rooms/{ROOM}/participants", {"kind": "user", "id": "plain"})
    with room_page(browser, hub.ranch.url, made["api_key"]) as page:  # no 403 asked: no console error
        expect(page.locator("figure.route").first.locator(".route-text")).to_have_text(OLD_ROUTE)
        expect(page.locator(".route-replay")).to_have_count(0)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    """A hub offering no config, the same room and turn."""
    folder = tmp_path_factory.mktemp("web-replay-none")
    with serve_ranch(TEAM.format(findings="user"), folder / "hub.db") as ranch:
        admin = Api(ranch.url, ADMIN_KEY)
        admin.post("/rooms", {"id": ROOM, "participants": [{"kind": "team", "id": "desk"}]})
        admin.post(f"/rooms/{ROOM}/messages", {"text": "@desk find papers on moss"})
        wait_until(lambda: admin.execution_status(ROOM, "desk") == "ready", what="the team's turn")
        yield ranch


def test_without_offered_configs_the_page_says_so_in_one_line(browser: Browser, bare: RunningRanch) -> None:
    with room_page(browser, bare.url) as page:
        figure = page.locator("figure.route").first
        expect(figure.locator(".route-replay")).to_have_text(
            "No configs to replay this turn against: the server offers none."
        )
        expect(figure.get_by_text("Replay against…")).to_have_count(0)
