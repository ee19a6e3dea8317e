"""The page at a phone's width and with wide teams (issue 40), in Debian's chromium: the message box
takes the phone's width, a five-lifeline route diagram shows every label whole inside it, and the
agents list's Find button is styled as the page's other buttons.

One in-process demo hub for the module (the page's files are what it serves); chromium as
tests/web/test_web_page.py drives it, never skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from _support.hubkit import RunningRanch, serve_ranch
from ranch.cli.demo import demo_config

DEMO_KEY = "rk_demo"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRanch]:
    with serve_ranch(demo_config(), tmp_path_factory.mktemp("layout") / "t.db", demo=True) as served:
        yield served


def open_page(browser: Browser, hub: RunningRanch, width: int, *, signed_in: bool = True) -> Page:
    context = browser.new_context(base_url=hub.url, viewport={"width": width, "height": 800})
    context.set_default_timeout(10_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/")
    if not signed_in:
        return page
    page.get_by_label("API key").fill(DEMO_KEY)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Rooms", exact=True)).to_be_visible()
    assert errors == []
    return page


def test_at_a_phones_width_the_message_box_takes_the_width(browser: Browser, hub: RunningRanch) -> None:
    width = 375
    page = open_page(browser, hub, width)
    try:
        page.get_by_role("link", name="Helpdesk demo").click()
        page.get_by_role("button", name="Send").wait_for()
        page.wait_for_load_state("networkidle")  # the room's history is in: the page has settled
        # both boxes from one frame: the page may scroll between two separate reads
        box, send = page.evaluate(BOXES)
        assert box["width"] >= 0.85 * width, f"the message box is {box['width']:.0f} px of {width}"
        assert send["right"] <= width and send["top"] >= box["bottom"], (box, send)  # below it
        assert page.evaluate("document.documentElement.scrollWidth") <= width
    finally:
        page.context.close()


BOXES = """() => {
  const send = [...document.querySelectorAll("button")].find((b) => b.textContent.trim() === "Send");
  return [document.getElementById("composer-input"), send].map((element) => {
    const rect = element.getBoundingClientRect();
    return { width: rect.width, top: rect.top, bottom: rect.bottom, right: rect.right };
  });
}"""
"""The message box's and the Send button's boxes, read in one frame."""

FIVE_LIFELINES = [
    ("triage", "user", "researcher", "needs research on the whole topic"),
    ("researcher", "triage", "writer", "findings ready for a first draft"),
    ("writer", "researcher", "reviewer", "draft ready for a careful review"),
    ("reviewer", "writer", "triage", "reviewed, approved and sent back"),
    ("triage", "reviewer", "user", "specialist finished"),
]

DRAW = """async (hops) => {
  const { RouteBook, renderRouteDiagram } = await import("/static/js/route-diagram.js");
  const book = new RouteBook();
  let turn;
  for (const hop of hops) turn = book.add(hop, "2026-01-01T12:00:00Z");
  const figure = document.createElement("figure");
  figure.className = "route";
  const scroll = document.createElement("div");
  scroll.className = "route-scroll";
  scroll.append(renderRouteDiagram(turn, "five"));
  figure.append(scroll);
  document.querySelector("main").replaceChildren(figure);
  const frame = document.querySelector("svg.route-diagram").getBoundingClientRect();
  return [...document.querySelectorAll("svg.route-diagram text")].map((text) => {
    const box = text.getBoundingClientRect();
    const shown = [...text.childNodes].filter((node) => node.nodeType === Node.TEXT_NODE);
    return { text: shown.map((node) => node.textContent).join(""), left: box.left - frame.left,
             right: frame.right - box.right, cls: text.getAttribute("class") };
  });
}"""


def test_a_five_lifeline_route_shows_every_label_whole_inside_the_diagram(
    browser: Browser, hub: RunningRanch
) -> None:
    """On a desktop and a phone (the page's route-diagram module, drawing a turn of five lifelines)."""
    page = open_page(browser, hub, 1280, signed_in=False)
    hops = [
        {"execution_id": "e1", "team": "desk", "agent": agent, "sender": sender, "recipient": recipient,
         "reason": reason, "hop": number, "ms": 1.5}
        for number, (agent, sender, recipient, reason) in enumerate(FIVE_LIFELINES, 1)
    ]  # fmt: skip
    try:
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 800})
            check_labels(page.evaluate(DRAW, hops))
    finally:
        page.context.close()


def check_labels(labels: list[dict[str, Any]]) -> None:
    reasons = [label["text"] for label in labels if label["cls"] == "rd-reason"]
    assert reasons == ["to desk"] + [f"{n}. {hop[3]}" for n, hop in enumerate(FIVE_LIFELINES, 1)]
    names = [label["text"] for label in labels if label["cls"] == "rd-name"]
    assert names == ["user", "triage", "researcher", "writer", "reviewer"]
    for label in labels:
        assert "…" not in label["text"], f"cut off: {label['text']!r}"
        assert label["left"] >= 0 and label["right"] >= 0, f"outside the diagram: {label}"


ACCENT = """(() => {
  const probe = document.body.appendChild(document.createElement("div"));
  probe.style.background = "var(--accent)";
  const color = getComputedStyle(probe).backgroundColor;
  probe.remove();
  return color;
})()"""


def test_the_agents_find_button_is_styled_as_the_pages_buttons(browser: Browser, hub: RunningRanch) -> None:
    page = open_page(browser, hub, 1280)
    try:
        page.goto("/agents")
        find = page.get_by_role("button", name="Find")
        expect(find).to_be_visible()
        styled = page.get_by_role("button", name="Sign out")  # the quiet variant: compare the base
        looks = "(b) => [getComputedStyle(b).borderRadius, getComputedStyle(b).fontWeight]"
        assert find.evaluate(looks) == styled.evaluate(looks)
        assert find.evaluate("(b) => getComputedStyle(b).backgroundColor") == page.evaluate(ACCENT)
    finally:
        page.context.close()
