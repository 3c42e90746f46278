"""During a database outage a browser's page answers an HTML 503 page with Retry-After, and the
API keeps its JSON 503 body (issue 36.5: pages answered the JSON body)."""

from __future__ import annotations

import pytest
from sqlalchemy import event
from sqlalchemy.exc import OperationalError


@pytest.fixture
def outage(env):
    """Every new connection is refused, as when the database server is down."""

    def refuse(*_args, **_kwargs):  # noqa: ANN202
        raise OperationalError("connect", {}, Exception("connection refused: server is down"))

    engine = env.db.engine
    engine.dispose()
    event.listen(engine, "do_connect", refuse)
    try:
        yield env
    finally:
        event.remove(engine, "do_connect", refuse)


def test_a_page_during_a_database_outage_is_an_html_503_with_retry_after(outage):
    page = outage.client.get("/", headers={"Accept": "text/html,application/xhtml+xml"})
    assert page.status_code == 503, page.text
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers.get("retry-after")
    assert "database is unavailable" in page.text and "<html" in page.text.lower()


def test_the_api_during_a_database_outage_keeps_its_json_503(outage):
    answer = outage.client.get("/api/v1/phases", headers={"Accept": "text/html"})
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "database.unavailable"
    assert answer.headers.get("retry-after")
