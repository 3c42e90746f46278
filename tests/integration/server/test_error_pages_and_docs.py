"""Pages that must work for a person (issue 14, items 7 and 8): an unknown URL answers a browser
with the styled page (API clients still get JSON), an error page knows who is logged in and
never points at the JSON API, and /docs and /redoc load their assets from this server."""

from __future__ import annotations

import re

HTML = {"Accept": "text/html,application/xhtml+xml"}


def test_an_unknown_url_gets_a_page_in_a_browser_and_json_from_the_api(env):
    page = env.client.get("/no/such/page", headers=HTML)
    assert page.status_code == 404 and page.headers["content-type"].startswith("text/html")
    assert "There is no page at /no/such/page" in page.text and "Log in" in page.text
    assert "Content-Security-Policy" in page.headers
    api = env.client.get("/api/v1/no-such-thing", headers=HTML)
    assert api.status_code == 404 and api.headers["content-type"] == "application/json"


def test_an_error_page_shows_the_logged_in_user_and_no_api_url(env):
    from test_participant_view import _login

    _, headers = env.user("ann")
    _login(env, headers)
    page = env.client.get("/phases/999", headers=HTML)
    assert page.status_code == 404
    assert "ann (participant)" in page.text and 'href="/login"' not in page.text
    assert "/api/v1" not in page.text
    assert "Your submissions" in page.text


def test_swagger_and_redoc_load_everything_from_this_server(env):
    for url in ("/docs", "/redoc"):
        page = env.client.get(url)
        assert page.status_code == 200
        sources = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        local = [s for s in sources if s.startswith("/static/") or s == "/openapi.json"]
        assert sources and local == sources, sources
        assert "cdn" not in page.text.lower() and "fonts.googleapis" not in page.text
        for source in sources:
            asset = env.client.get(source)
            assert asset.status_code == 200 and len(asset.content) > 1000, source
