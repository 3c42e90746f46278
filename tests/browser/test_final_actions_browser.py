"""Issue 32 finding 3 in a real browser, on the organizer's dashboard: an upcoming phase offers
"Open now" and Reopen asks first; a disqualification needs a reason and follows the carried copy
into the final (whose waiting run is cancelled); "Publish results" is refused while runs are
pending, saying how many, and is never offered on a public phase; at 400 px every Actions cell
is on screen without scrolling sideways (the tables stack), with screenshots at 1400 and 400 px.
Fails at a55d28d (no "Open now", no reason asked, Actions off-screen at 400 px)."""

from __future__ import annotations

from datetime import timedelta

from _browser_support import NARROW, WIDE, login, shots_at_both_widths, write_zip
from playwright.sync_api import expect
from sqlalchemy import select

from server.models import Phase, Run, Submission, utcnow


def _phases(arena, olga: str) -> tuple[int, int, int]:
    """feedback (open), its final (carried into when feedback closes) and an upcoming phase."""
    feedback = arena.phase(olga, ends_at=utcnow() + timedelta(days=5))
    now = utcnow()
    with arena.db.session() as s:
        comp_id = s.get(Phase, feedback).competition_id
        final = Phase(competition_id=comp_id, name="final", status="open", created_at=now,
                      carry_from_id=feedback, runs_per_submission=1)
        later = Phase(competition_id=comp_id, name="bonus", status="open", created_at=now,
                      starts_at=now + timedelta(days=3), runs_per_submission=1)
        s.add_all([final, later])
        s.flush()
        return feedback, final.id, later.id


def _actions_on_screen(page) -> None:
    """At 400 px every button of an Actions cell lies inside the viewport as laid out."""
    page.set_viewport_size({"width": NARROW, "height": 900})
    boxes = page.locator("td[data-label=Actions] button, td[data-label=Decision] button")
    assert boxes.count() > 0
    for i in range(boxes.count()):
        box = boxes.nth(i).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= NARROW, (
            f"button {boxes.nth(i).inner_text()!r} at x={box and box['x']} is off-screen")
    page.set_viewport_size({"width": WIDE, "height": 900})


def test_final_actions_on_the_dashboard(browser, arena, tmp_path):
    olga, ann, bob = arena.user("olga", role="organizer"), arena.user("ann"), arena.user("bob")
    feedback, final, later = _phases(arena, olga)
    archive = write_zip(tmp_path / "s.zip")
    ann_id = arena.upload(feedback, ann, archive)
    arena.worker().evaluate(0.9)
    arena.upload(feedback, bob, archive)
    arena.worker().evaluate(0.6)
    page = browser.new_context(base_url=arena.url).new_page()
    login(page, olga)
    page.goto("/organizer")
    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.get_by_role("button", name="Open now phase bonus").click()
    assert asked and "before its start date" in asked[0]
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Open now phase bonus").click()
    expect(page.get_by_text("The phase was opened now")).to_be_visible()
    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Close phase feedback").click()
    expect(page.get_by_text("The phase was closed.")).to_be_visible()
    expect(page.get_by_role("button", name="Publish results of phase feedback")).to_have_count(0)
    shots_at_both_widths(page, "32-final-dashboard")
    _actions_on_screen(page)

    with arena.db.session() as s:
        copy = s.execute(select(Submission).where(
            Submission.carried_from_id == ann_id)).scalar_one()
        copy_id, copy_run = copy.id, s.execute(select(Run.id).where(
            Run.submission_id == copy.id)).scalar_one()
    row = page.locator("#recent ~ .table-wrap tbody tr", has_text=f"#{ann_id}").first
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.accept()))
    row.get_by_role("button", name=f"Disqualify #{ann_id}").click()
    assert dialogs == []  # the required reason stops the form before it asks or posts
    row.get_by_label(f"Why disqualify #{ann_id}").fill("used the test labels")
    row.get_by_role("button", name=f"Disqualify #{ann_id}").click()
    expect(page.get_by_text("The submission's standing was changed")).to_be_visible()
    assert dialogs and "every copy carried from it" in dialogs[0]
    with arena.db.session() as s:
        assert s.get(Submission, copy_id).disqualified_reason == "used the test labels"
        assert s.get(Run, copy_run).state == "cancelled"
    arena.done.add(copy_run)  # its job was revoked: the fake worker must not claim it

    page.get_by_role("button", name="Close phase final").click()
    expect(page.get_by_text("The phase was closed.")).to_be_visible()
    page.get_by_role("button", name="Publish results of phase final").click()
    expect(page.get_by_text("1 run(s) pending (1 queued, 0 running)")).to_be_visible()
    shots_at_both_widths(page, "32-publish-refused")
    arena.worker().evaluate(0.5)
    page.goto("/organizer")
    page.get_by_role("button", name="Publish results of phase final").click()
    expect(page.get_by_text("The phase's results were published")).to_be_visible()
    expect(page.get_by_role("button", name="Publish results of phase final")).to_have_count(0)
    expect(page.get_by_role("button", name="Reopen phase final")).to_be_visible()
    page.goto(f"/phases/{final}/leaderboard")
    expect(page.locator("tbody tr", has_text="ann")).to_have_count(0)
    expect(page.locator("tbody tr", has_text="bob")).to_have_count(1)
    shots_at_both_widths(page, "32-final-board")
    assert later
