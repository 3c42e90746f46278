"""Browser tests: headless Debian Chromium driven by Playwright against a live server (SQLite,
a RecordingJobQueue, a fake worker). Without Chromium or Playwright they skip locally and FAIL
when CI is set. One browser per session; a fresh database and server per test.

Screenshots go to $ARENA_BROWSER_ARTIFACTS (default /tmp/arena-browser-artifacts), outside the
working tree.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest
from _browser_support import Arena, LiveServer
from arena_test_services import require_service
from job_queue_fake import RecordingJobQueue

from server.app import create_app
from server.core.config import Settings
from server.core.db import upgrade_database

CHROMIUM = Path(os.environ.get("ARENA_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def pytest_collection_modifyitems(items):
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.browser)


@pytest.fixture(scope="session")
def browser():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        require_service("playwright", str(exc))
    if not CHROMIUM.exists():
        require_service("Chromium", f"{CHROMIUM} does not exist (set ARENA_CHROMIUM)")
    from playwright.sync_api import expect

    # Pages poll every 2-5 s and CI machines are loaded: let assertions wait a few polls.
    expect.set_options(timeout=15_000)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("browser-db") / "arena.db"
    upgrade_database(f"sqlite:///{path}")
    return path


@pytest.fixture
def arena(sqlite_template, tmp_path):
    db_path = tmp_path / "arena.db"
    shutil.copy(sqlite_template, db_path)
    settings = Settings(data_dir=tmp_path / "data", database_url=f"sqlite:///{db_path}",
                        auto_migrate=False, reconcile_interval_s=0)
    queue = RecordingJobQueue()
    app = create_app(settings, queue=queue)
    with LiveServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        yield Arena(url=server.url, db=app.state.db, queue=queue, http=http)


@pytest.fixture
def page(browser, arena):
    context = browser.new_context(base_url=arena.url, viewport={"width": 1100, "height": 900})
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()

