"""The page's routes and assets, without a browser: the shell at every page path, the modules it
imports, the API and A2A paths left alone, and a palette that keeps text readable."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from _support.hubkit import serve_ranch
from ranch.cli.demo import demo_config
from ranch.web import STATIC, web_routes

SHELL_MARK = '<script type="module" src="/static/js/main.js"></script>'


def page_client() -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=Starlette(routes=web_routes()))
    return httpx.AsyncClient(transport=transport, base_url="http://ranch.test")


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["/", "/rooms", "/rooms/demo", "/agents", "/agents/triage", "/signin"])
async def test_every_page_path_serves_the_shell(path: str) -> None:
    async with page_client() as client:
        response = await client.get(path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert SHELL_MARK in response.text


@pytest.mark.anyio
async def test_assets_are_served_with_their_types_and_unknown_ones_are_404() -> None:
    async with page_client() as client:
        script = await client.get("/static/js/main.js")
        assert script.status_code == 200
        assert "javascript" in script.headers["content-type"]
        assert (await client.get("/static/app.css")).headers["content-type"].startswith("text/css")
        assert (await client.get("/static/js/nope.js")).status_code == 404
        assert (await client.get("/rooms/demo/extra")).status_code == 404


IMPORT = re.compile(r"""^\s*import\s[^;]*?from\s+"(\.{1,2}/[^"]+)";""", re.MULTILINE | re.DOTALL)


def test_every_module_import_resolves_to_a_file() -> None:
    modules = sorted(STATIC.rglob("*.js"))
    assert modules
    for module in modules:
        for target in IMPORT.findall(module.read_text()):
            assert (module.parent / target).resolve().is_file(), f"{module.name} imports a missing {target}"


def test_the_page_never_shadows_the_api_or_a2a(tmp_path: Path) -> None:
    with serve_ranch(demo_config(), tmp_path / "ranch.db") as ranch, httpx.Client(trust_env=False) as http:
        assert SHELL_MARK in http.get(f"{ranch.url}/").text
        assert http.get(f"{ranch.url}/api/v1/me").status_code == 401
        assert http.get(f"{ranch.url}/api/v1/nowhere").headers["content-type"] != "text/html; charset=utf-8"
        assert "agents" in http.get(f"{ranch.url}/a2a/agents").json()


# -- contrast: WCAG 2 relative luminance over the palette in app.css ---------------------------------

TEXT_PAIRS = [
    ("text", "bg"), ("text", "surface"), ("text", "mine-bg"), ("text", "accent-bg"), ("text", "idle-bg"),
    ("muted", "bg"), ("muted", "surface"), ("muted", "mine-bg"), ("muted", "accent-bg"), ("muted", "bad-bg"),
    ("accent", "bg"), ("accent", "surface"), ("accent", "accent-bg"), ("on-accent", "accent"),
    ("ok", "ok-bg"), ("warn", "warn-bg"), ("ask", "ask-bg"), ("bad", "bad-bg"), ("bad", "bg"),
    ("idle", "idle-bg"),
]  # fmt: skip
"""Every (text, background) pair the stylesheet uses; each must reach 4.5:1."""

UI_PAIRS = [("focus", "bg"), ("focus", "surface"), ("line", "bg"), ("line", "surface")]
"""Focus rings and input borders against what surrounds them; each must reach 3:1."""


def palette() -> dict[str, str]:
    css = (STATIC / "app.css").read_text()
    return dict(re.findall(r"--([a-z-]+):\s*(#[0-9a-fA-F]{6})\s*;", css))


def luminance(color: str) -> float:
    def channel(value: int) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (int(color[i : i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: str, b: str) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize(("minimum", "pairs"), [(4.5, TEXT_PAIRS), (3.0, UI_PAIRS)])
def test_the_palette_is_readable(minimum: float, pairs: list[tuple[str, str]]) -> None:
    colors = palette()
    weak = {f"{fg} on {bg}": round(contrast(colors[fg], colors[bg]), 2) for fg, bg in pairs}
    assert {pair: ratio for pair, ratio in weak.items() if ratio < minimum} == {}
