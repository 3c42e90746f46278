"""The interactive API documentation (/docs: Swagger UI, /redoc: ReDoc) with their JavaScript
and CSS served from this installation, not from a CDN: they work offline and on a network that
blocks CDNs. The assets ship inside the `fastapi-offline` package (MIT); only its static files
are used, through FastAPI's own page builders.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse

router = APIRouter(include_in_schema=False)
ASSETS = {"swagger-ui-bundle.js": "text/javascript", "swagger-ui.css": "text/css",
          "redoc.standalone.js": "text/javascript", "favicon.png": "image/png"}
"""Files of the package served under /static/ beside the site's own (server/web/static_files.py)."""
DOCS_CSP = ("default-src 'self'; script-src 'self' 'unsafe-inline' blob:; worker-src 'self' blob:; "
            "style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; "
            "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'self'")
"""This site only: what the bundles would still fetch elsewhere (ReDoc's footer logo, Swagger's
validator badge) is never requested. Both pages start their viewer with an inline script and
style themselves inline, hence 'unsafe-inline' here and nowhere else."""


def assets_dir() -> Path:
    """The folder of the packaged Swagger UI and ReDoc files."""
    import fastapi_offline

    return Path(fastapi_offline.__file__).resolve().parent / "static"


@router.get("/docs")
def swagger_ui(request: Request) -> HTMLResponse:
    page = get_swagger_ui_html(openapi_url=request.app.openapi_url,
                               title=f"{request.app.title} — API",
                               swagger_js_url="/static/swagger-ui-bundle.js",
                               swagger_css_url="/static/swagger-ui.css",
                               swagger_favicon_url="/static/favicon.png",
                               swagger_ui_parameters={"validatorUrl": None})
    page.headers["Content-Security-Policy"] = DOCS_CSP
    return page


@router.get("/redoc")
def redoc(request: Request) -> HTMLResponse:
    # with_google_fonts=False: the page must not reach out for fonts either.
    page = get_redoc_html(openapi_url=request.app.openapi_url,
                          title=f"{request.app.title} — API reference",
                          redoc_js_url="/static/redoc.standalone.js",
                          redoc_favicon_url="/static/favicon.png", with_google_fonts=False)
    page.headers["Content-Security-Policy"] = DOCS_CSP
    return page
