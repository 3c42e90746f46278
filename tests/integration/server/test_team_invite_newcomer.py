"""A team invite holds a newcomer all the way (issue 32.4): from the link, through login and
sign-up (the `next` survives both), through joining the competition (its terms accepted on the
invite page), into the team; where organizers approve participants, the invite page asks,
then says to come back, and the same link joins once approved. Web pages, real routes."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

from test_pages import login
from test_teams import create, team_competition

from server.models import Competition, CompetitionMember

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def test_a_newcomer_follows_an_invite_through_sign_up_and_joining_into_the_team(env):
    comp_id, _ = team_competition(env)
    _, ann = env.user("ann")
    code = create(env, comp_id, ann).json()["invite_code"]
    with env.db.session() as s:
        s.get_one(Competition, comp_id).terms = "Share your method."
    invite = f"/teams/join/{code}"
    to_login = env.client.get(invite, follow_redirects=False)
    assert to_login.status_code == 303
    assert parse_qs(urlsplit(to_login.headers["location"]).query)["next"] == [invite]
    login_page = env.client.get(to_login.headers["location"]).text
    assert "join the team that invited you" in login_page
    signup_href = re.search(r'href="(/signup[^"]*)" id="signup-link"', login_page).group(1)
    signup_page = env.client.get(signup_href.replace("&amp;", "&")).text
    assert f'name="next" value="{invite}"' in signup_page
    made = env.client.post("/signup", follow_redirects=False, data={
        "csrf_token": CSRF.search(signup_page).group(1), "username": "bob",
        "email": "bob@uni.example.org", "password": "correct horse", "next": invite})
    assert made.status_code == 303 and made.headers["location"] == invite, made.text
    page = env.client.get(invite).text
    assert 'id="invite-newcomer"' in page and 'name="accept_terms"' in page
    joined = env.client.post(invite, follow_redirects=False, data={
        "csrf_token": CSRF.search(page).group(1), "accept_terms": "yes"})
    assert joined.status_code == 303, joined.text
    assert joined.headers["location"] == f"/competitions/{comp_id}/team"
    team_page = env.client.get(joined.headers["location"]).text
    assert "bob" in team_page and "ann" in team_page
    members = env.client.get(f"/api/v1/competitions/{comp_id}/team", headers=ann).json()
    assert [m["username"] for m in members["members"]] == ["ann", "bob"]


def test_where_organizers_approve_the_invite_waits_for_the_approval(env):
    owner, organizer = env.user("olga", role="organizer")
    comp_id, _ = team_competition(env)
    with env.db.session() as s:
        comp = s.get_one(Competition, comp_id)
        comp.participation, comp.owner_id = "approval", owner.id
    ann_user, ann = env.user("ann")
    with env.db.session() as s:  # ann is approved; bob, the newcomer, is not
        s.add(CompetitionMember(competition_id=comp_id, user_id=ann_user.id,
                                status="approved", requested_at=env.clock.now))
    code = create(env, comp_id, ann).json()["invite_code"]
    invite = f"/teams/join/{code}"
    bob_user, bob = env.user("bob")
    login(env, bob)
    page = env.client.get(invite).text
    assert "Ask to take part" in page
    asked = env.client.post(invite, data={"csrf_token": CSRF.search(page).group(1)},
                            follow_redirects=False)
    assert asked.status_code == 303 and asked.headers["location"] == invite, asked.text
    page = env.client.get(invite).text
    assert 'id="invite-pending"' in page and "Open this link again" in page
    approved = env.client.post(
        f"/api/v1/competitions/{comp_id}/participants/{bob_user.id}/approve", headers=organizer)
    assert approved.status_code in (200, 204), approved.text
    page = env.client.get(invite).text
    joined = env.client.post(invite, data={"csrf_token": CSRF.search(page).group(1)},
                             follow_redirects=False)
    assert joined.headers["location"] == f"/competitions/{comp_id}/team", joined.text
    members = env.client.get(f"/api/v1/competitions/{comp_id}/team", headers=bob).json()
    assert [m["username"] for m in members["members"]] == ["ann", "bob"]


def test_sign_up_without_a_next_page_lands_on_a_welcome(env):
    page = env.client.get("/signup").text
    made = env.client.post("/signup", data={
        "csrf_token": CSRF.search(page).group(1), "username": "cat",
        "email": "cat@uni.example.org", "password": "correct horse"})
    assert made.status_code == 200 and 'id="welcome"' in made.text and "cat" in made.text


def test_the_team_page_invite_names_the_address_the_member_used(env):
    """It named 127.0.0.1:8000 on any deployment without a public URL (issue 32.4)."""
    comp_id, _ = team_competition(env)
    _, ann = env.user("ann")
    code = create(env, comp_id, ann).json()["invite_code"]
    login(env, ann)
    page = env.client.get(f"/competitions/{comp_id}/team").text
    assert f"http://testserver/teams/join/{code}" in page
    assert "127.0.0.1:8000" not in page
