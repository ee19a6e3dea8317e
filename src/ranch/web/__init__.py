"""The browser page: `/` and its client-side routes serve one HTML shell, `/static` its assets.

The page is plain HTML, CSS and ES modules (no build step); it talks to the hub only through
the REST and WebSocket API of docs/api.md. `web_routes()` goes last in the app's routes, so it
never shadows `/a2a` or `/api`.
"""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"

PAGES = ("/", "/rooms", "/rooms/{room_id}", "/agents", "/agents/{agent_id}", "/signin")
"""Paths the page routes itself (History API); a deep link to any of them loads the shell."""


async def _shell(request: Request) -> Response:
    # no-cache: the shell names the assets, so a new release must not be hidden by a stale copy
    return FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-cache"})


def web_routes() -> list[BaseRoute]:
    """The page's routes: the shell at each client-side path, and the assets under /static."""
    routes: list[BaseRoute] = [Route(path, _shell, methods=["GET", "HEAD"]) for path in PAGES]
    routes.append(Mount("/static", app=StaticFiles(directory=STATIC), name="static"))
    return routes
