"""Issue 23 in a real browser: a person with only a browser goes from the front page to a
scored team submission — sign up, accept the terms and join, form a team, submit with a method
name, see the team and the method on the board, answer the fact sheet (which the organizer
exports) — and takes an API token for the command line
from the competition's Get-started box and the profile page. Every step is screenshotted at
1400 px and 400 px (under $ARENA_BROWSER_ARTIFACTS, printed), no page wider than the phone.
"""

from __future__ import annotations

import re

from _browser_support import ARTIFACTS, shots_at_both_widths, write_zip
from playwright.sync_api import expect

from server.models import Competition, Phase

TERMS = "You will not share the **test data** and you will publish your method."


def newcomer_competition(arena, organizer: str) -> tuple[int, int]:
    phase_id = arena.phase(organizer, quota_per_day=3)
    with arena.db.session() as s:
        s.get(Phase, phase_id).factsheet = [
            {"key": "approach", "label": "Describe your method", "kind": "text",
             "required": True, "choices": []},
            {"key": "pretrained", "label": "Pre-trained weights?", "kind": "choice",
             "required": False, "choices": ["yes", "no"]}]
        comp = s.get(Competition, s.get(Phase, phase_id).competition_id)
        comp.terms, comp.teams_allowed, comp.team_max_size = TERMS, True, 4
        comp.tabs = {"overview": "Meta-learn on **some** domains, be tested on others.",
                     "data": "Ten Meta-Album domains, 128x128 images.",
                     "evaluation": "Normalized balanced accuracy, worst of the runs."}
        return comp.id, phase_id


def test_a_newcomer_signs_up_joins_forms_a_team_and_is_scored(page, arena, tmp_path):
    print(f"screenshots in {ARTIFACTS}")
    organizer = arena.user("olga", role="organizer")
    comp_id, phase_id = newcomer_competition(arena, organizer)
    page.goto("/")
    page.get_by_role("link", name="Sign up").click()
    expect(page.locator("#signup-rule")).to_contain_text("Anyone may sign up")
    shots_at_both_widths(page, "23-signup")
    page.get_by_label("Username").fill("ada")
    page.get_by_label("Email").fill("ada@uni.example.org")
    page.get_by_label("Password").fill("correct horse battery")
    page.get_by_role("button", name="Create account").click()
    expect(page.get_by_role("link", name="ada (participant)")).to_be_visible()

    page.get_by_role("link", name="Cross-domain few-shot").click()
    expect(page.locator("#entry")).to_contain_text("terms of this competition")
    expect(page.get_by_role("link", name="Submit")).to_have_count(0)  # not before joining
    expect(page.locator("#get-started")).to_contain_text("arena data generate sample_data")
    shots_at_both_widths(page, "23-competition-before-joining")
    page.get_by_role("link", name="Terms", exact=True).click()
    expect(page.locator("#tab-terms strong")).to_have_text("test data")
    page.get_by_role("link", name="Data", exact=True).click()
    expect(page.locator("#tab-data")).to_contain_text("Ten Meta-Album domains")
    page.get_by_label(re.compile("I have read and accept")).check()
    page.get_by_role("button", name="Join").click()
    expect(page.get_by_role("link", name="Submit")).to_be_visible()
    page.get_by_role("button", name=re.compile("arena login")).click()
    expect(page.locator("#cli-login")).to_contain_text("arena login --server ")
    shots_at_both_widths(page, "23-competition-joined")

    page.get_by_role("link", name="Your team").click()
    page.get_by_label("Team name").fill("Few-shot Foxes")
    page.get_by_role("button", name="Create team").click()
    expect(page.locator("h1")).to_have_text("Team Few-shot Foxes")
    expect(page.locator("#invite-link")).to_contain_text("/teams/join/")
    shots_at_both_widths(page, "23-team")

    page.goto(f"/phases/{phase_id}/submit")
    expect(page.locator("#quota")).to_contain_text("3 of 3 left today")
    page.get_by_label("Submission zip").set_input_files(str(write_zip(tmp_path / "s.zip")))
    page.get_by_label("Method name").fill("ProtoNet + fine-tuning")
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(re.compile(r"/submissions/\d+$"))
    arena.worker().evaluate(0.62)
    page.goto(f"/phases/{phase_id}/leaderboard")
    board = page.locator("table").first
    expect(board).to_contain_text("Few-shot Foxes")
    expect(board).to_contain_text("ProtoNet + fine-tuning")
    shots_at_both_widths(page, "23-leaderboard-team-method")

    page.goto(f"/phases/{phase_id}")
    page.get_by_role("link", name="Fact sheet").click()
    page.get_by_label("Describe your method").fill("Prototypes, then fine-tuning.")
    page.get_by_label("Pre-trained weights?").select_option("no")
    page.get_by_role("button", name="Save answers").click()
    expect(page.locator("#saved")).to_contain_text("Your answers are saved")
    shots_at_both_widths(page, "23-factsheet")
    exported = arena.http.get(f"/api/v1/phases/{phase_id}/factsheet/answers",
                              params={"format": "csv"},
                              headers={"Authorization": f"Bearer {organizer}"})
    assert exported.status_code == 200, exported.text
    assert "ada," in exported.text and "Prototypes, then fine-tuning." in exported.text

    page.goto(f"/competitions/{comp_id}")
    expect(page.locator("#standing")).to_contain_text("1 of 1")
    page.get_by_role("link", name="ada (participant)").click()
    page.get_by_label("New token's name").fill("laptop")
    page.get_by_role("button", name="Create token").click()
    expect(page.locator("#new-token")).to_contain_text("shown only once")
    expect(page.locator("#tokens")).to_contain_text("laptop")
    expect(page.locator("#tokens")).not_to_contain_text("web")  # sessions are not tokens
    shots_at_both_widths(page, "23-profile-tokens")


def test_password_login_and_a_wrong_password(page, arena):
    arena.http.post("/api/v1/auth/signup", json={
        "username": "bo", "email": "bo@example.org", "password": "a long password"}
    ).raise_for_status()
    page.goto("/login")
    page.get_by_label("Username").fill("bo")
    page.get_by_label("Password").fill("wrong one")
    page.get_by_role("button", name="Log in", exact=True).click()
    expect(page.locator(".error")).to_contain_text("wrong password")
    page.get_by_label("Username").fill("bo")
    page.get_by_label("Password").fill("a long password")
    page.get_by_role("button", name="Log in", exact=True).click()
    page.wait_for_url(re.compile(r"/my$"))
    shots_at_both_widths(page, "23-logged-in")
