"""The web pages in a real browser: submitting through the form, watching the state change
while the page polls, detailed results with their plots, the leaderboard, and an organizer
re-running a submission. The fake worker moves runs through the internal API."""

from __future__ import annotations

import re

from _browser_support import login, shot, write_zip
from playwright.sync_api import expect


def test_participant_submits_watches_the_run_and_opens_detailed_results(page, arena, tmp_path):
    token = arena.user("ann")
    phase_id = arena.phase()
    login(page, token)
    page.goto(f"/phases/{phase_id}/submit")
    page.get_by_label("Submission zip").set_input_files(str(write_zip(tmp_path / "s.zip")))
    page.get_by_label("Note").fill("protonet <b>v2</b>")
    page.get_by_role("button", name="Submit").click()

    page.wait_for_url(re.compile(r"/submissions/\d+$"))
    state = page.locator("#state")
    expect(state).to_have_text("queued")
    expect(page.get_by_text("position 1 in the queue")).to_be_visible()
    expect(page.get_by_text("protonet <b>v2</b>")).to_be_visible()  # shown as text, escaped
    shot(page, "1-submission-queued")

    worker = arena.worker()
    worker.claim()
    expect(state).to_have_text("running")  # the page polls; no reload
    worker.heartbeat("running")
    page.goto("/my")
    row_state = page.locator("#live tbody tr").first.locator(".state")
    expect(row_state).to_have_text("running")
    shot(page, "2-my-submissions-running")
    worker.finish(base_score=0.62)
    expect(row_state).to_have_text("finished")
    expect(page.locator("#live")).to_have_attribute("data-live", "off")  # polling stops
    shot(page, "3-my-submissions-finished")

    page.locator("#live tbody tr").first.get_by_role("link", name=re.compile(r"^#\d+$")).click()
    expect(page.locator("#state")).to_have_text("finished")
    expect(page.get_by_text("all 12 tasks")).to_be_visible()  # the owner sees the log
    page.get_by_role("link", name="Open").click()
    plots = page.locator("#plots img")
    expect(plots).to_have_count(3)  # score vs ways, vs shots, per dataset
    for i in range(3):
        expect(plots.nth(i)).to_be_visible()
        assert plots.nth(i).get_attribute("src").startswith("data:image/png;base64,")
        assert plots.nth(i).evaluate("img => img.naturalWidth") > 100  # a decoded image
    expect(page.locator("#tasks tr.task")).to_have_count(12)
    shot(page, "4-detailed-results")


def test_the_submit_form_and_pages_work_without_javascript(browser, arena, tmp_path):
    token = arena.user("ann")
    phase_id = arena.phase(hide_logs=True)
    context = browser.new_context(base_url=arena.url, java_script_enabled=False)
    page = context.new_page()
    login(page, token)
    page.goto(f"/phases/{phase_id}/submit")
    page.get_by_label("Submission zip").set_input_files(str(write_zip(tmp_path / "s.zip")))
    page.get_by_role("button", name="Submit").click()
    page.wait_for_url(re.compile(r"/submissions/\d+$"))
    expect(page.locator("#state")).to_have_text("queued")
    expect(page.get_by_text("The organizers hide logs in this phase")).to_be_visible()
    arena.worker().evaluate(0.5)
    page.reload()
    expect(page.locator("#state")).to_have_text("finished")
    expect(page.locator("pre.log")).to_have_count(0)
    context.close()


def test_leaderboard_marks_baselines_and_sorts_by_column(page, arena, tmp_path):
    organizer = arena.user("olga", role="organizer")
    phase_id = arena.phase(organizer)
    archive = write_zip(tmp_path / "s.zip")
    for name, base in (("ann", 0.3), ("bob", 0.7), ("cat", 0.5)):
        arena.upload(phase_id, arena.user(name), archive)
        arena.worker().evaluate(base)
    login(page, organizer)
    page.goto("/organizer")
    bob_row = page.locator("tr", has_text="bob")
    bob_row.get_by_role("button", name=re.compile("Mark as baseline")).click()
    expect(page.get_by_text("The baseline mark was changed.")).to_be_visible()

    page.goto(f"/phases/{phase_id}/leaderboard")
    names = page.locator("table.leaderboard tbody tr td:nth-child(2)")
    expect(names).to_have_text([re.compile("bob"), "cat", "ann"])
    expect(page.locator("tr.baseline")).to_contain_text("baseline")
    expect(page.locator("table.leaderboard thead th")).to_contain_text(
        ["#", "Participant", "Score", "95% CI", "birds", "insects", "plankton", "Submitted"])
    page.get_by_role("button", name="Score").click()
    expect(names).to_have_text(["ann", "cat", re.compile("bob")])
    page.get_by_role("button", name="Score").click()
    expect(names).to_have_text([re.compile("bob"), "cat", "ann"])
    shot(page, "5-leaderboard")
    page.set_viewport_size({"width": 380, "height": 800})
    shot(page, "6-leaderboard-narrow")


def test_organizer_reruns_a_finished_submission_from_the_dashboard(page, arena, tmp_path):
    organizer = arena.user("olga", role="organizer")
    phase_id = arena.phase(organizer)
    submission_id = arena.upload(phase_id, arena.user("ann"), write_zip(tmp_path / "s.zip"))
    first_run = arena.worker().evaluate(0.4)
    login(page, organizer)
    page.goto("/organizer")
    row = page.locator("tr", has_text=f"#{submission_id}")
    expect(row.locator(".state")).to_have_text("finished")
    row.get_by_role("button", name=re.compile("Re-run")).click()

    expect(page.get_by_text("The submission was queued again")).to_be_visible()
    expect(page.locator("tr", has_text=f"#{submission_id}").locator(".state")).to_have_text(
        "queued")
    queue_row = page.locator("#live tr", has_text=f"#{submission_id}")
    expect(queue_row.locator("td").first).to_have_text("1")  # position in the queue
    shot(page, "7-organizer-rerun-queued")
    assert [job[0] for job in arena.queue.jobs if job[0] != first_run], "no new job enqueued"

    worker = arena.worker("gpu-worker-2")
    worker.claim()
    # The dashboard polls every 5 s: wait for a few polls, not one.
    expect(page.locator("#live")).to_contain_text("gpu-worker-2", timeout=20_000)
    worker.heartbeat("running")
    worker.finish(0.45)
    page.goto(f"/submissions/{submission_id}")
    expect(page.locator("#state")).to_have_text("finished")
    expect(page.get_by_text("Earlier runs, replaced by a re-run (1)")).to_be_visible()
    shot(page, "8-submission-after-rerun")
