"""Issue 24 in a real browser: one phase state for the organizer and the participants (trap 2),
a close that says who was carried and who was not and why — on the dashboard, in the audit log
and on each participant's page (trap 3), and disqualification shown as such everywhere, with no
way to select the disqualified submission (trap 4); time limits in seconds stay in seconds and
a closed phase says the day it closed (trap 7)."""

from __future__ import annotations

import uuid
from datetime import timedelta

from _browser_support import login, shots_at_both_widths, write_zip
from playwright.sync_api import expect
from sqlalchemy import select

from server.models import AuditLog, Competition, Phase, Submission, User, utcnow
from server.services.disqualify import set_disqualified


def _two_phases(arena, owner_token: str) -> tuple[int, int]:
    """A feedback phase (open, 5 days left) and its final (stored open, starting in 8 days),
    in a competition whose one league needs a score above 0.5 to enter the final."""
    now = utcnow()
    with arena.db.session() as s:
        owner = s.execute(select(User).where(User.username == "olga")).scalar_one()
        comp = Competition(slug=f"c-{uuid.uuid4().hex[:8]}", title="Cross-domain few-shot",
                           owner_id=owner.id, created_at=now,
                           leagues=[{"name": "main", "final_threshold": 0.5}])
        s.add(comp)
        s.flush()
        feedback = Phase(competition_id=comp.id, name="feedback", status="open",
                         ends_at=now + timedelta(days=5), time_limit_s=90,
                         runs_per_submission=1, created_at=now)
        s.add(feedback)
        s.flush()
        final = Phase(competition_id=comp.id, name="final", status="open",
                      starts_at=now + timedelta(days=8), ends_at=now + timedelta(days=20),
                      carry_from_id=feedback.id, runs_per_submission=1, created_at=now)
        s.add(final)
        s.flush()
        return feedback.id, final.id


def _disqualify(arena, submission_id: int, reason: str) -> None:
    with arena.db.session() as s:
        olga = s.execute(select(User).where(User.username == "olga")).scalar_one()
        set_disqualified(s, s.get(Submission, submission_id), olga, True, reason, utcnow())


def test_closing_says_who_was_carried_and_why_not_and_everyone_sees_one_phase_state(
        browser, arena, tmp_path):
    olga = arena.user("olga", role="organizer")
    ann, bob, cat = arena.user("ann"), arena.user("bob"), arena.user("cat")
    feedback, final = _two_phases(arena, olga)
    archive = write_zip(tmp_path / "s.zip")
    ann_id = arena.upload(feedback, ann, archive)
    arena.worker().evaluate(0.7)
    bob_id = arena.upload(feedback, bob, archive)
    arena.worker().evaluate(0.2)
    cat_id = arena.upload(feedback, cat, archive)
    arena.worker().evaluate(0.8)
    _disqualify(arena, cat_id, "used the test labels")

    # Trap 4: the disqualified submission says so, offers no selection, and is refused.
    owner = browser.new_context(base_url=arena.url).new_page()
    login(owner, cat)
    expect(owner.locator("#live tbody tr", has_text=f"#{cat_id}")).to_contain_text(
        "disqualified")
    owner.goto(f"/submissions/{cat_id}")
    expect(owner.locator("#disqualified-tag")).to_have_text("disqualified")
    expect(owner.locator("#standing")).to_contain_text("this submission was disqualified")
    expect(owner.locator("#standing")).not_to_contain_text("another submission")
    expect(owner.get_by_role("button", name="Use for the leaderboard")).to_have_count(0)
    refused = arena.http.post(f"/api/v1/submissions/{cat_id}/select",
                              headers={"Authorization": f"Bearer {cat}"})
    assert refused.status_code == 409, refused.text
    assert refused.json()["error"]["code"] == "submission.disqualified"
    assert arena.http.get(f"/api/v1/submissions/{cat_id}", headers={
        "Authorization": f"Bearer {cat}"}).json()["disqualified_reason"] == "used the test labels"
    owner.goto(f"/phases/{feedback}")
    expect(owner.get_by_text("90 s per run")).to_be_visible()

    # Trap 3: the organizer closes feedback and reads who went where.
    staff = browser.new_context(base_url=arena.url).new_page()
    login(staff, olga)
    staff.once("dialog", lambda d: d.accept())
    staff.get_by_role("button", name="Close phase feedback").click()
    expect(staff.get_by_text("The phase was closed.")).to_be_visible()
    summary = staff.locator("table.close-summary tbody tr")
    expect(summary).to_have_count(3)
    expect(summary.filter(has_text="ann")).to_contain_text("carried")
    expect(summary.filter(has_text="bob")).to_contain_text("below the league threshold 0.5")
    expect(summary.filter(has_text="cat")).to_contain_text("disqualified: used the test labels")
    shots_at_both_widths(staff, "24-dashboard-close-summary")

    # Trap 2: the final's entries were carried, so it is open for everyone, not "upcoming".
    final_row = staff.locator("tr", has=staff.get_by_role("link", name="final", exact=True))
    expect(final_row.locator("td").nth(2)).to_contain_text("open")
    for viewer in (staff, owner):
        viewer.goto(f"/phases/{final}")
        expect(viewer.locator(".timeline li", has_text="final")).to_contain_text("open")
        expect(viewer.locator(".timeline li", has_text="final")).not_to_contain_text(
            "upcoming")

    with arena.db.session() as s:
        entry = s.execute(select(AuditLog).where(AuditLog.action == "phase.close")).scalar_one()
        outcomes = {line["username"]: line["outcome"] for line in entry.details["summary"]}
    assert outcomes == {"ann": "carried", "bob": "below_threshold", "cat": "disqualified"}

    # Each participant reads their own line on their page.
    for token, submission_id, words in (
            (bob, bob_id, "is not above the threshold 0.5"),
            (ann, ann_id, "was carried into final"),
            (cat, cat_id, "was disqualified (used the test labels)")):
        viewer = browser.new_context(base_url=arena.url).new_page()
        login(viewer, token)
        note = viewer.locator(".close-note")
        expect(note).to_have_count(1)
        expect(note).to_contain_text(f"submission #{submission_id}")
        expect(note).to_contain_text(words)


def test_a_rerun_keeps_its_reason_and_an_early_close_says_the_day_it_closed(page, arena,
                                                                            tmp_path):
    olga = arena.user("olga", role="organizer")
    ann = arena.user("ann")
    phase_id = arena.phase(olga, ends_at=utcnow() + timedelta(days=9))
    submission_id = arena.upload(phase_id, ann, write_zip(tmp_path / "s.zip"))
    arena.worker().evaluate(0.6)
    login(page, olga)
    page.goto(f"/submissions/{submission_id}")
    page.get_by_placeholder("why re-run (kept in the audit log)").fill("worker 3 had a bad GPU")
    page.get_by_role("button", name="Re-run").click()
    arena.worker().evaluate(0.6)
    page.goto(f"/submissions/{submission_id}")
    page.get_by_text("Earlier runs, replaced by a re-run").click()
    expect(page.locator("#rerun-reasons")).to_contain_text("worker 3 had a bad GPU")

    page.goto("/organizer")
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Close phase feedback").click()
    page.goto(f"/phases/{phase_id}")
    today = utcnow().strftime("%Y-%m-%d")
    expect(page.locator("#accepting")).to_contain_text(f"closed since {today}")


def test_a_missing_compiled_module_gets_advice_that_works(page, arena, tmp_path):
    ann = arena.user("ann")
    phase_id = arena.phase()
    submission_id = arena.upload(phase_id, ann, write_zip(tmp_path / "s.zip"))
    worker = arena.worker()
    worker.claim()
    worker.fail("import_error", "import raised: No module named 'sklearn'\n\nTraceback (most "
                "recent call last):\n  File \"/submission/model.py\", line 1, in <module>\n"
                "    import sklearn\nModuleNotFoundError: No module named 'sklearn'")
    login(page, ann)
    page.goto(f"/submissions/{submission_id}")
    module = page.locator("#failure-module")
    expect(module).to_contain_text("comes from the package scikit-learn")
    expect(module).to_contain_text("compiled parts")
    command = page.locator("#failure-command")
    expect(command).to_contain_text("--only-binary=:all:")
    expect(command).to_contain_text("scikit-learn")
    expect(command).not_to_contain_text("vendor sklearn")
    expect(page.locator("#failure")).not_to_contain_text("Run `arena run` locally")
