"""What participants see before they upload (issue 14): a phase whose dates have passed is
not `open` in the API and offers no form; the timeline counts down to the close and names the
next phase; the quota left is shown; descriptions are rendered Markdown, sanitized; a visitor
sent to the login page is told why and brought back."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import update

from server.models import Competition, Phase


def test_a_phase_past_its_end_date_is_listed_closed_and_refuses_nothing_silently(env):
    now = env.clock.now
    past = env.phase(status="open", starts_at=now - timedelta(days=90),
                     ends_at=now - timedelta(days=30)).id
    ahead = env.phase(status="open", starts_at=now + timedelta(days=2)).id
    running = env.phase(status="open", ends_at=now + timedelta(days=3, hours=4)).id
    listed = {p["id"]: p for p in env.client.get("/api/v1/phases").json()}
    assert (listed[past]["status"], listed[past]["accepting_submissions"]) == ("closed", False)
    assert (listed[ahead]["status"], listed[ahead]["accepting_submissions"]) == (
        "upcoming", False)
    assert (listed[running]["status"], listed[running]["accepting_submissions"]) == (
        "open", True)
    assert env.client.get(f"/api/v1/phases/{past}").json()["status"] == "closed"


def test_closed_phase_pages_offer_no_upload_form_and_say_why(env):
    now = env.clock.now
    _, headers = env.user("ann")
    past = env.phase(status="open", ends_at=now - timedelta(days=1)).id
    env.client.cookies.clear()
    phase_page = env.client.get(f"/phases/{past}").text
    assert "it takes no more submissions" in phase_page
    assert f'href="/phases/{past}/submit"' not in phase_page
    _login(env, headers)
    submit_page = env.client.get(f"/phases/{past}/submit").text
    assert "<form class=\"stack\" method=\"post\" action=\"/phases/" not in submit_page
    assert "it takes no more submissions" in submit_page


def test_the_phase_page_counts_down_and_names_the_final_phase_after_it(env):
    now = env.clock.now
    feedback = env.phase(status="open", starts_at=now - timedelta(days=1),
                         ends_at=now + timedelta(days=3, hours=4))
    with env.db.session() as s:
        final = Phase(competition_id=feedback.competition_id, name="final", status="open",
                      starts_at=now + timedelta(days=3, hours=4), carry_from_id=feedback.id,
                      created_at=now)
        s.add(final)
    page = env.client.get(f"/phases/{feedback.id}").text
    assert "closes in 3 days 4 h" in page
    assert f'Next: <a href="/phases/{final.id}">final</a> (final phase' in page
    final_page = env.client.get(f"/phases/{final.id}").text
    assert "Not open yet" in final_page and "opens in 3 days 4 h" in final_page
    comp_page = env.client.get(f"/competitions/{feedback.competition_id}").text
    assert comp_page.index(">dev</a>") < comp_page.index(">final</a>")  # in time order


def test_the_quota_left_is_shown_on_the_phase_and_submit_pages(env):
    _, headers = env.user("ann")
    phase_id = env.phase(quota_per_day=3, quota_total=10).id
    assert env.submit(phase_id, headers).status_code == 201
    _login(env, headers)
    for url in (f"/phases/{phase_id}", f"/phases/{phase_id}/submit"):
        text = env.client.get(url).text
        assert "2 of 3 left today (resets in 12 h, at 00:00 UTC)" in text
        assert "9 of 10 left in total" in text
    env.submit(phase_id, headers)
    env.submit(phase_id, headers)
    assert "an upload now would be refused" in env.client.get(f"/phases/{phase_id}").text


def test_descriptions_are_markdown_rendered_without_letting_html_or_script_links_through(env):
    phase = env.phase(description="**Bold** rules\n\n- one\n- two\n\n<script>alert(1)</script>"
                                  "\n\n[click](javascript:alert(1))")
    with env.db.session() as s:
        s.execute(update(Competition).where(Competition.id == phase.competition_id)
                  .values(description="# Welcome\n\nSee [the kit](https://example.org)."))
    text = env.client.get(f"/phases/{phase.id}").text
    assert "<strong>Bold</strong>" in text and "<li>one</li>" in text
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;" in text
    assert 'href="javascript:' not in text
    comp = env.client.get(f"/competitions/{phase.competition_id}").text
    assert '<a href="https://example.org">the kit</a>' in comp


def test_an_anonymous_visitor_is_told_why_to_log_in_and_brought_back(env):
    _, headers = env.user("ann")
    phase_id = env.phase().id
    answer = env.client.get(f"/phases/{phase_id}/submit", follow_redirects=False)
    assert answer.status_code == 303
    login_page = env.client.get(answer.headers["location"]).text
    assert "Log in to see that page" in login_page
    back = _login(env, headers, next_path=f"/phases/{phase_id}/submit")
    assert back == f"/phases/{phase_id}/submit"
    assert _login(env, headers, next_path="//evil.example/x") == "/my"


def test_organizers_land_on_their_dashboard_after_login(env):
    _, headers = env.user("olga", role="organizer")
    assert _login(env, headers) == "/organizer"


def _login(env, headers, next_path: str = "") -> str:
    """Log in through the form; returns where the browser is sent."""
    import re

    env.client.cookies.clear()  # logged out: the only CSRF field is the login form's
    form = env.client.get("/login").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', form).group(1)
    answer = env.client.post("/login", data={"token": headers["Authorization"].split()[1],
                                             "csrf_token": csrf, "next": next_path},
                             follow_redirects=False)
    assert answer.status_code == 303
    return answer.headers["location"]
