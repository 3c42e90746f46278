"""Smaller account-side hardening (issue 33 item 13), each failing at a55d28d:

- a bundle's Get-started links (`tabs.starting_kit`, `tabs.sample_data`) took
  `//evil.example/kit.zip`, which a browser opens on another host: now only https:// URLs and
  paths on this platform that start with a single "/";
- pages sent no Strict-Transport-Security header when cookies are Secure (served over HTTPS);
- a plain `alembic -c server/alembic.ini upgrade head` failed "no database URL": it now
  migrates the server's database (ARENA_DATABASE_URL, else the file under ARENA_DATA_DIR).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pydantic
import pytest
from inprocess_support import inprocess_app

from server.bundles.schema import BundleSpec

ROOT = Path(__file__).resolve().parents[2]


def bundle(**tabs: str) -> BundleSpec:
    return BundleSpec.model_validate({"slug": "cc", "title": "C", "tabs": tabs,
                                      "phases": [{"name": "p"}]})


@pytest.mark.parametrize("link", ["//evil.example/kit.zip", "/\\evil.example/kit.zip",
                                  "http://example.org/kit.zip", "javascript:alert(1)",
                                  "https:///kit.zip", "ftp://example.org/kit.zip"])
@pytest.mark.parametrize("field", ["starting_kit", "sample_data"])
def test_get_started_links_must_stay_https_or_on_this_platform(field, link):
    with pytest.raises(pydantic.ValidationError, match="https://|single '/'"):
        bundle(**{field: link})


def test_https_and_platform_paths_are_accepted():
    spec = bundle(starting_kit="https://example.org/kit.zip", sample_data="/kit/sample.zip")
    assert spec.tabs.starting_kit == "https://example.org/kit.zip"


def test_the_api_refuses_such_a_bundle(tmp_path):
    with inprocess_app(tmp_path) as env:
        organizer = env.token_for("olga", "organizer")
        answer = env.client.post("/api/v1/competitions/bundle", headers=organizer, json={
            "yaml": "slug: cc\ntitle: C\ntabs:\n  starting_kit: //evil.example/kit.zip\n"
                    "phases:\n  - name: p\n"})
        assert answer.status_code == 422, answer.text
        assert "evil.example" in answer.text


@pytest.mark.parametrize("secure", [True, False])
def test_hsts_when_cookies_are_secure(tmp_path, secure):
    with inprocess_app(tmp_path, session_cookie_secure=secure) as env:
        for path in ("/login", "/signup", "/", "/api/v1/phases", "/no-such-page"):
            header = env.client.get(path).headers.get("Strict-Transport-Security")
            if secure:
                assert header and "max-age=31536000" in header, path
            else:
                assert header is None, path


def test_the_forgot_page_names_what_really_exists(tmp_path):
    """Issue 32.4: it pointed at `arena user reset-link`, which does not exist."""
    with inprocess_app(tmp_path) as env:
        page = env.client.get("/forgot").text
    assert "arena user reset-link" not in page
    assert "admin" in page and "/api/v1/users/{id}/reset-link" in page


def test_the_plain_alembic_cli_migrates_the_servers_database(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")}
    db = tmp_path / "cli.db"
    for extra, expected in (({"ARENA_DATABASE_URL": f"sqlite:///{db}"}, db),
                            ({"ARENA_DATA_DIR": str(tmp_path / "data")},
                             tmp_path / "data" / "arena.db")):
        done = subprocess.run(
            [sys.executable, "-m", "alembic", "-c", str(ROOT / "server" / "alembic.ini"),
             "upgrade", "head"], cwd=tmp_path, env=env | extra, capture_output=True, text=True,
            timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        with sqlite3.connect(expected) as conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        assert {"users", "competitions", "alembic_version"} <= tables
