"""Rendering pages: one Jinja2 environment (autoescaped), security headers, CSRF checks, and a
route class that turns the services' errors into HTML pages instead of JSON.

Every page is sent with a Content-Security-Policy that allows scripts and styles from this
site only (no inline script), so an escaping slip in a template cannot run code. State-changing
forms carry a CSRF token, an HMAC of the session cookie, checked before anything changes.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.responses import RedirectResponse, Response
from fastapi.routing import APIRoute
from fastapi.templating import Jinja2Templates
from markdown_it import MarkdownIt
from markupsafe import Markup
from starlette.datastructures import UploadFile
from starlette.exceptions import HTTPException as StarletteHTTPException

from server.api.deps import SESSION_COOKIE
from server.core.config import Settings
from server.core.errors import (
    ArenaError,
    AuthRequiredError,
    CsrfError,
    describe_error,
)
from server.core.form_text import check_field_text
from server.core.security import csrf_token, same_secret
from server.services.timeline import format_duration, format_limit
from submission_api.log_text import escape_controls

if TYPE_CHECKING:
    from server.models import User

log = logging.getLogger("arena.web")
SERVER_DIR = Path(__file__).resolve().parent.parent
STATIC_DIR = SERVER_DIR / "static"
PAGE_CSP = ("default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
            "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'self'")
SECURITY_HEADERS = {"Content-Security-Policy": PAGE_CSP, "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "same-origin"}


def format_score(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def format_time(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M UTC")


def render_markdown(text: str | None) -> Markup:
    """Organizer-written Markdown as HTML, safe to show: raw HTML in the text is escaped, not
    passed through, and markdown-it refuses `javascript:`/`vbscript:`/`data:` link targets, so
    the only tags out are those Markdown itself makes (the page CSP forbids inline script too).
    """
    return Markup(_MARKDOWN.render(text or ""))


_MARKDOWN = MarkdownIt("commonmark", {"html": False, "typographer": False}).enable("table")


def _environment() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(SERVER_DIR / "templates"))
    templates.env.filters["score"] = format_score
    templates.env.filters["when"] = format_time
    templates.env.filters["markdown"] = render_markdown
    templates.env.filters["controls"] = escape_controls  # participant output: no raw ESC/CR
    templates.env.filters["duration"] = lambda td: "" if td is None else format_duration(
        td.total_seconds())
    templates.env.filters["limit"] = format_limit  # 90 s stays "90 s", not "1 min"
    return templates


templates = _environment()


def session_csrf(request: Request, settings: Settings) -> str:
    cookie = request.cookies.get(SESSION_COOKIE)
    return csrf_token(settings.secret_key, cookie) if cookie else ""


def render(request: Request, name: str, user: User | None, settings: Settings,
           status: int = 200, **context: Any) -> Response:
    """A page from `templates/<name>` with the user, CSRF token and security headers."""
    csrf = session_csrf(request, settings) if user is not None else ""
    response = templates.TemplateResponse(request, name, {"user": user, "csrf": csrf, **context},
                                          status_code=status)
    response.headers.update(SECURITY_HEADERS)  # HSTS: server/core/hsts.py, on every answer
    return response


def check_csrf(request: Request, settings: Settings, sent: str | UploadFile | None) -> None:
    """Raise CsrfError unless `sent` is the token of this request's session cookie (a form
    field, which a forged form may send as a file: never a token)."""
    expected = session_csrf(request, settings)
    if not same_secret(sent, expected):
        raise CsrfError("the form's CSRF token is missing or wrong; reload the page and retry")


def login_redirect(request: Request | None = None, why: str = "login") -> RedirectResponse:
    """To the login page, saying why (`why` is a key of LOGIN_REASONS, never free text) and
    where to come back to: this request's own path, if it is a page (checked again at login)."""
    query = {"why": why}
    if request is not None and request.method == "GET":
        query["next"] = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/login?{urlencode(query)}", status_code=303)


LOGIN_REASONS = {"login": "Log in to see that page: it shows your own submissions.",
                 "expired": "Your session ended (it lasts 7 days, or you logged out elsewhere); "
                            "log in again to continue.",
                 "organizer": "Log in with an organizer's account to use the dashboard.",
                 "reset": "Your new password is set; log in with it.",
                 "invite": "Log in, or sign up, to join the team that invited you: you come "
                           "back to the invitation afterwards."}


def safe_next(target: str | None) -> str | None:
    """`target` when it is a path of this site (`/x`, not `//host` or `/\\host`), else None."""
    if not target or not target.startswith("/") or target.startswith(("//", "/\\")):
        return None
    return target if all(c.isprintable() and c not in "\\" for c in target) else None


def error_page(request: Request, exc: Exception) -> Response:
    """The HTML form of the API's error answer: same status and message, less the hints meant
    for API clients (a person on a page is not sent to `/api/v1/...`), for whoever is logged in
    (the header shows their name, not "Log in")."""
    status, body = describe_error(exc)
    error = body["error"]
    return render(request, "error.html", page_user(request), request.app.state.settings,
                  status=status, message=web_message(error["message"]), code=error["code"])


def web_message(message: str) -> str:
    """`message` without its clauses that point at the JSON API (`; list them at /api/v1/…`)."""
    parts = [p for p in message.split("; ") if not API_HINT.search(p)]
    return "; ".join(parts) or message


API_HINT = re.compile(r"/api/v1|/internal/|Authorization: Bearer|\b(POST|GET|PATCH|PUT) /")


def page_user(request: Request) -> User | None:
    """The user of the request's session cookie, or None (for pages rendered outside a route:
    error pages must still know who is logged in)."""
    from server.services.users import user_for_token

    cookie = request.cookies.get(SESSION_COOKIE)
    if not cookie:
        return None
    try:
        with request.app.state.db.session() as session:
            user = user_for_token(session, cookie, request.app.state.clock())
            if user is not None:
                session.expunge(user)
            return user
    except Exception:  # noqa: BLE001 - an error page must render even when the database fails
        log.exception("web.error_page.user_lookup_failed")
        return None


def wants_html(request: Request) -> bool:
    """A browser asking for a page: not an API or worker path, and HTML accepted."""
    path = request.url.path
    return (not path.startswith(("/api/", "/internal/", "/static/"))
            and "text/html" in request.headers.get("accept", ""))


def install_page_errors(app: FastAPI) -> None:
    """Unknown URLs and wrong methods answer a browser with the styled error page (and API
    clients with FastAPI's JSON, as before)."""
    async def handle(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)  # registered for that class only
        if not wants_html(request):
            return await http_exception_handler(request, exc)
        message = {404: f"There is no page at {request.url.path}.",
                   405: f"{request.url.path} cannot be opened this way ({request.method})."
                   }.get(exc.status_code, str(exc.detail))
        response = render(request, "error.html", page_user(request), app.state.settings,
                          status=exc.status_code, message=message,
                          code="not_found" if exc.status_code == 404 else "http")
        for name, value in (exc.headers or {}).items():
            response.headers[name] = value
        return response

    app.add_exception_handler(StarletteHTTPException, handle)


FORM_TYPE = "application/x-www-form-urlencoded"


async def check_form_text(request: Request) -> None:
    """Refuse (422 `form.bad_bytes`) a URL-encoded form whose fields hold bytes no honest form
    sends: NUL and other control characters but tab and line breaks, or bytes that are not
    UTF-8 (decoded as U+FFFD). Before any handler, so no form reaches a service or the database
    (Postgres refuses NUL in text: a 500) with them. The form is parsed once and cached on the
    request, so handlers read the same fields. Multipart bodies (uploads) stream past here;
    their text fields are checked where they are parsed."""
    if request.method != "POST" or not request.headers.get("content-type", "").startswith(
            FORM_TYPE):
        return
    for name, value in (await request.form()).multi_items():
        check_field_text(name, value)


class PageRoute(APIRoute):
    """Routes of HTML pages: an expired session goes to the login page, other service errors
    become an error page with the status the JSON API would give."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page_handler(request: Request) -> Response:
            try:
                await check_form_text(request)
                return await handler(request)
            except AuthRequiredError:
                had_session = SESSION_COOKIE in request.cookies
                response = login_redirect(request, "expired" if had_session else "login")
                response.delete_cookie(SESSION_COOKIE)
                return response
            except ArenaError as exc:
                return error_page(request, exc)

        return page_handler
