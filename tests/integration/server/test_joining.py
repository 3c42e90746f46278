"""Joining a competition on its page (issue 23 item 2): Join / Request access with terms, the
pending banner, and no Submit button or quota until the participant may submit; the upload
itself is refused until then, saying what to do."""

from __future__ import annotations

import re

from server.models import Competition, Phase

TERMS = "You will not share the **test data**."


def web_client(env, headers):
    """env.client, logged in on the web with the API token in `headers`."""
    page = env.client.get("/login").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)
    token = headers["Authorization"].split()[1]
    answer = env.client.post("/login", data={"csrf_token": csrf, "token": token},
                             follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return env.client


def session_csrf(page: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page).group(1)


def competition_with(env, **fields) -> tuple[int, int]:
    phase = env.phase(quota_per_day=5)
    with env.db.session() as s:
        comp = s.get(Competition, s.get(Phase, phase.id).competition_id)
        for key, value in fields.items():
            setattr(comp, key, value)
        return comp.id, phase.id


def test_terms_must_be_accepted_before_submit_or_quota_show(env):
    comp_id, phase_id = competition_with(env, terms=TERMS)
    _, ann = env.user("ann")
    client = web_client(env, ann)
    page = client.get(f"/competitions/{comp_id}").text
    assert f'action="/competitions/{comp_id}/join"' in page and "accept_terms" in page
    assert f'href="/phases/{phase_id}/submit"' not in page
    submit_page = client.get(f"/phases/{phase_id}/submit").text
    assert 'id="quota"' not in submit_page and 'type="file"' not in submit_page
    assert "join it first" in submit_page
    refused = env.submit(phase_id, ann)
    assert refused.status_code == 403 and "--accept-terms" in refused.text
    terms = client.get(f"/competitions/{comp_id}?tab=terms").text
    assert "<strong>test data</strong>" in terms
    no_tick = client.post(f"/competitions/{comp_id}/join", data={"csrf_token": session_csrf(page)})
    assert no_tick.status_code == 422 and "terms to accept" in no_tick.text
    joined = client.post(f"/competitions/{comp_id}/join", follow_redirects=False,
                         data={"csrf_token": session_csrf(page), "accept_terms": "yes"})
    assert joined.status_code == 303
    page = client.get(f"/competitions/{comp_id}").text
    assert "accept_terms" not in page and f'href="/phases/{phase_id}/submit"' in page
    assert 'id="quota"' in client.get(f"/phases/{phase_id}/submit").text
    assert env.submit(phase_id, ann).status_code == 201


def test_an_approval_competition_shows_pending_until_approved(env):
    comp_id, phase_id = competition_with(env, participation="approval")
    _, ann = env.user("ann")
    client = web_client(env, ann)
    page = client.get(f"/competitions/{comp_id}").text
    assert "Request access" in page
    client.post(f"/competitions/{comp_id}/join", data={"csrf_token": session_csrf(page)})
    phase_page = client.get(f"/phases/{phase_id}").text
    assert "Pending approval" in phase_page and 'id="quota"' not in phase_page
    assert f'href="/phases/{phase_id}/submit"' not in phase_page
    assert "yours is pending approval" in phase_page


def test_api_join_needs_accept_terms_when_there_are_terms(env):
    comp_id, _ = competition_with(env, terms=TERMS)
    _, ann = env.user("ann")
    url = f"/api/v1/competitions/{comp_id}/participation"
    refused = env.client.post(url, headers=ann)
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "participation.terms"
    joined = env.client.post(url, headers=ann, json={"accept_terms": True})
    assert joined.json() == {"competition_id": comp_id, "mode": "open", "status": "approved",
                             "terms": True}


def test_the_demo_competition_fills_its_tabs_terms_and_teams(env):
    from server.demo import DEMO_PAGES

    _, organizer = env.user("olga", role="organizer")
    made = env.client.post("/api/v1/competitions", headers=organizer, json={
        "slug": "demo", "title": "Demo", "phases": [{"name": "feedback", "status": "open",
                                                     "protocol": {"name": "fixed"}}],
        **DEMO_PAGES})
    assert made.status_code == 201, made.text
    comp_id = made.json()["id"]
    for tab, text in (("overview", "How it works"), ("data", "synthetic Meta-Album"),
                      ("evaluation", "normalized"), ("terms", "This is a demo")):
        page = env.client.get(f"/competitions/{comp_id}?tab={tab}").text
        assert text in page, tab
    with env.db.session() as s:
        comp = s.get(Competition, comp_id)
        assert comp.teams_allowed and comp.team_max_size == 4
