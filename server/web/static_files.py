"""The site's stylesheet and script, and the API docs' packaged assets, under /static/."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import FileResponse, Response

from server.core.errors import NotFoundError
from server.web import api_docs
from server.web.rendering import STATIC_DIR, PageRoute

router = APIRouter(include_in_schema=False, route_class=PageRoute)
STATIC_FILES = {"arena.css": "text/css", "arena.js": "text/javascript"}


@router.get("/static/{name}")
def static_file(name: str) -> Response:
    """The site's stylesheet and script, and the API docs' packaged assets (web/api_docs.py)."""
    if name in api_docs.ASSETS:
        return FileResponse(api_docs.assets_dir() / name, media_type=api_docs.ASSETS[name],
                            headers={"Cache-Control": "public, max-age=86400"})
    if name not in STATIC_FILES:
        raise NotFoundError(f"no static file {name!r}")
    return FileResponse(STATIC_DIR / name, media_type=STATIC_FILES[name],
                        headers={"Cache-Control": "public, max-age=300"})
