"""Issue 14 in a real browser: the phase page (timeline, countdown, quota), a closed phase with
no upload form, a failed run that explains itself, a running one that says what it is doing,
and the organizer dashboard — each screenshotted at 1400 px and 400 px (artifacts under
$ARENA_BROWSER_ARTIFACTS), with no page wider than a 400 px phone."""

from __future__ import annotations

from datetime import timedelta

from _browser_support import login, shot, shots_at_both_widths, write_zip
from playwright.sync_api import expect

from server.models import Phase, utcnow

TRACE = "\n".join([
    "Traceback (most recent call last):",
    *[f'  File "/opt/arena/submission_api/runner/step{i}.py", line {10 + i}, in step{i}\n'
      f"    step{i + 1}()" for i in range(8)],
    '  File "/submission/model.py", line 3, in <module>',
    "    import lightgbm",
    "ModuleNotFoundError: No module named 'lightgbm'"])


def test_participant_phase_page_shows_timeline_countdown_and_quota(page, arena, tmp_path):
    token = arena.user("ann")
    now = utcnow()
    phase_id = arena.phase(starts_at=now - timedelta(days=5),
                           ends_at=now + timedelta(days=3, hours=4, minutes=30),
                           quota_per_day=5, quota_total=20,
                           description="**Meta-train** on 10 domains.\n\n| a | b |\n|---|---|\n"
                                       "| 1 | 2 |")
    with arena.db.session() as s:
        feedback = s.get(Phase, phase_id)
        s.add(Phase(competition_id=feedback.competition_id, name="final", status="open",
                    starts_at=feedback.ends_at, carry_from_id=phase_id, created_at=now))
    arena.upload(phase_id, token, write_zip(tmp_path / "s.zip"))
    login(page, token)
    page.goto(f"/phases/{phase_id}")
    expect(page.locator("#accepting")).to_contain_text("closes in 3 days 4 h")
    expect(page.locator("#accepting")).to_contain_text("Next: final")
    expect(page.locator("#quota")).to_contain_text("4 of 5 left today")
    expect(page.locator("#quota")).to_contain_text("19 of 20 left in total")
    expect(page.locator(".prose strong")).to_have_text("Meta-train")  # Markdown, rendered
    expect(page.locator("ol.timeline li")).to_have_count(2)
    expect(page.get_by_role("link", name="Submit")).to_be_visible()
    shots_at_both_widths(page, "14-phase-page")


def test_a_phase_past_its_end_offers_no_upload_form(page, arena):
    token = arena.user("ann")
    phase_id = arena.phase(ends_at=utcnow() - timedelta(days=2))
    login(page, token)
    page.goto(f"/phases/{phase_id}/submit")
    expect(page.locator("#accepting")).to_contain_text("it takes no more submissions")
    expect(page.get_by_label("Submission zip")).to_have_count(0)
    page.goto(f"/phases/{phase_id}")
    expect(page.get_by_role("link", name="Submit")).to_have_count(0)


def test_a_failed_run_explains_itself(page, arena, tmp_path):
    token = arena.user("ann")
    phase_id = arena.phase()
    submission_id = arena.upload(phase_id, token, write_zip(tmp_path / "s.zip"))
    worker = arena.worker()
    worker.claim()
    worker.fail("import_error", f"import raised: No module named 'lightgbm'\n\n{TRACE}",
                log="==> stderr <==\n" + "x" * 3000)  # one very long log line
    login(page, token)
    page.goto(f"/submissions/{submission_id}")
    failure = page.locator("#failure")
    expect(failure).to_contain_text("model.py could not be imported.")
    expect(failure).to_contain_text("Stage: importing model.py")
    frames = failure.locator("pre.trace").first
    expect(frames).to_contain_text("5 earlier frames")
    expect(frames).to_contain_text("import lightgbm")
    # lightgbm has compiled parts: the wheel built for the sandbox, not a plain vendor install
    expect(page.locator("#failure-command")).to_contain_text("--only-binary=:all:")
    expect(page.locator("#failure-command")).to_contain_text("lightgbm")
    expect(page.locator("#failure-module")).to_contain_text("numpy")
    shots_at_both_widths(page, "14-submission-failed")


def test_a_running_submission_says_its_stage_and_time(page, arena, tmp_path):
    token = arena.user("ann")
    phase_id = arena.phase(time_limit_s=1800)
    submission_id = arena.upload(phase_id, token, write_zip(tmp_path / "s.zip"))
    worker = arena.worker()
    worker.claim()
    worker.heartbeat("running")
    login(page, token)
    page.goto(f"/submissions/{submission_id}")
    expect(page.locator("#progress-0")).to_contain_text("running your code")
    expect(page.locator("#progress-0")).to_contain_text("limit 30 min")
    worker.heartbeat("running", {"step": "meta_test", "tasks_done": 37, "tasks_total": 200,
                                 "log_tail": "epoch 3 loss 0.41\n" + "y" * 2000})
    expect(page.locator("#progress-0")).to_contain_text("37 of 200 test tasks")  # polled
    expect(page.locator("#tail-0")).to_contain_text("epoch 3 loss 0.41")
    # The log below says where its live lines are, not that it is empty or arrives later only.
    expect(page.locator("#log-0")).to_contain_text("its last lines are shown above")
    shots_at_both_widths(page, "14-submission-running")
    worker.finish(0.62)
    expect(page.locator("#state")).to_have_text("finished")
    expect(page.locator("#score")).to_contain_text("95% CI over 12 test tasks")
    expect(page.locator("#standing")).to_contain_text("rank 1 of 1")
    shots_at_both_widths(page, "14-submission-finished")
    page.locator("#score").get_by_role("link", name="Detailed results").click()
    expect(page.locator("#plots img").first).to_be_visible()
    shot(page, "14-detailed-results")
    page.get_by_role("link", name=f"Submission #{submission_id}").click()
    expect(page).to_have_url(f"{arena.url}/submissions/{submission_id}")


def test_organizer_dashboard_at_both_widths(page, arena, tmp_path):
    organizer = arena.user("olga", role="organizer")
    phase_id = arena.phase(organizer)
    archive = write_zip(tmp_path / "s.zip")
    for name in ("ann", "bob"):
        arena.upload(phase_id, arena.user(name), archive)
    arena.worker().evaluate(0.5)
    login(page, organizer)
    expect(page).to_have_url(f"{arena.url}/organizer")  # staff land on the dashboard
    shots_at_both_widths(page, "14-organizer-dashboard")


def test_api_docs_render_with_no_network_but_this_server(page, arena):
    """Swagger UI and ReDoc draw the API from this server's files alone (other hosts blocked)."""
    blocked: list[str] = []

    def only_this_server(route):
        if route.request.url.startswith(arena.url):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    page.route("**/*", only_this_server)
    page.goto("/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("MetaDL Arena")
    page.goto("/redoc")
    expect(page.get_by_text("Code-submission competitions").first).to_be_visible()
    assert blocked == []


def test_an_unknown_url_shows_the_site_page_to_a_logged_in_user(page, arena):
    token = arena.user("ann")
    login(page, token)
    page.goto("/no/such/page")
    expect(page.locator("#error-message")).to_contain_text("There is no page at /no/such/page")
    expect(page.get_by_text("ann (participant)")).to_be_visible()
    expect(page.get_by_role("link", name="Log in")).to_have_count(0)
    page.context.clear_cookies()
    page.goto("/my")
    expect(page.get_by_text("Log in to see that page")).to_be_visible()


def test_dashboard_confirms_closing_reopens_filters_and_offers_baseline_for_finished_only(
        page, arena, tmp_path):
    organizer = arena.user("olga", role="organizer")
    phase_id = arena.phase(organizer)
    archive = write_zip(tmp_path / "s.zip")
    ann = arena.upload(phase_id, arena.user("ann"), archive)
    bob = arena.upload(phase_id, arena.user("bob"), archive)
    arena.worker().evaluate(0.5)  # ann's finishes; bob's waits
    login(page, organizer)

    ann_row = page.locator("tr", has_text=f"#{ann}")
    bob_row = page.locator("tr", has_text=f"#{bob}")
    expect(ann_row.get_by_role("button", name="Mark as baseline")).to_be_visible()
    expect(bob_row.get_by_role("button", name="Mark as baseline")).to_have_count(0)

    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.get_by_role("button", name="Close phase feedback").click()
    assert asked and "stops taking submissions" in asked[0]
    expect(page.locator("td .status-open")).to_have_count(1)  # dismissed: still open

    page.once("dialog", lambda d: d.accept())
    page.get_by_role("button", name="Close phase feedback").click()
    expect(page.get_by_text("The phase was closed.")).to_be_visible()
    reopen_asked: list[str] = []
    page.once("dialog", lambda d: (reopen_asked.append(d.message), d.accept()))
    page.get_by_role("button", name="Reopen phase feedback").click()
    shots_at_both_widths(page, "14-organizer-after-reopen")
    assert reopen_asked and "takes submissions again" in reopen_asked[0]
    expect(page.get_by_text("The phase was reopened")).to_be_visible()
    expect(page.locator("td .status-open")).to_have_count(1)

    page.get_by_label("State").select_option("queued")
    page.get_by_role("button", name="Filter").click()
    recent = page.locator("#recent ~ .table-wrap tbody tr")
    expect(recent).to_have_count(1)
    expect(recent.first).to_contain_text(f"#{bob}")
    page.get_by_label("Participant").fill("nobody-like-this")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("No submission matches the filter.")).to_be_visible()


def test_my_submissions_name_the_competition_and_the_entry_on_the_leaderboard(
        page, arena, tmp_path):
    token = arena.user("ann")
    phase_id = arena.phase()
    archive = write_zip(tmp_path / "s.zip")
    low = arena.upload(phase_id, token, archive)
    arena.worker().evaluate(0.3)
    high = arena.upload(phase_id, token, archive)
    arena.worker().evaluate(0.7)
    login(page, token)
    rows = page.locator("#live tbody tr")
    expect(rows).to_have_count(2)
    expect(page.locator("tr", has_text=f"#{high}")).to_contain_text("on the leaderboard")
    expect(page.locator("tr", has_text=f"#{low}")).not_to_contain_text("on the leaderboard")
    expect(rows.first).to_contain_text("Cross-domain few-shot")
    shots_at_both_widths(page, "14-my-submissions")


def test_an_organizer_disqualifies_a_submission_and_its_owner_sees_why(browser, arena,
                                                                        tmp_path):
    organizer, ann = arena.user("olga", role="organizer"), arena.user("ann")
    phase_id = arena.phase(organizer)
    submission_id = arena.upload(phase_id, ann, write_zip(tmp_path / "s.zip"))
    arena.worker().evaluate(0.6)
    staff = browser.new_context(base_url=arena.url).new_page()
    login(staff, organizer)
    staff.goto(f"/submissions/{submission_id}")
    staff.get_by_placeholder("reason (required; shown to the participant)").fill("used test labels")
    staff.once("dialog", lambda d: d.accept())
    staff.get_by_role("button", name="Disqualify").click()
    expect(staff.locator("#disqualified")).to_contain_text("used test labels")
    staff.goto(f"/phases/{phase_id}/leaderboard")
    expect(staff.get_by_text("No finished submission yet.")).to_be_visible()

    owner = browser.new_context(base_url=arena.url).new_page()
    login(owner, ann)
    owner.goto(f"/submissions/{submission_id}")
    expect(owner.locator("#disqualified")).to_contain_text("used test labels")
    staff.goto(f"/submissions/{submission_id}")
    staff.get_by_role("button", name="Reinstate").click()
    staff.goto(f"/phases/{phase_id}/leaderboard")
    expect(staff.locator("table.leaderboard tbody tr")).to_have_count(1)


def test_the_form_says_before_uploading_that_a_zip_was_already_submitted(page, arena,
                                                                         tmp_path):
    token = arena.user("ann")
    phase_id = arena.phase(quota_per_day=5)
    archive = write_zip(tmp_path / "s.zip")
    first = arena.upload(phase_id, token, archive)
    login(page, token)
    page.goto(f"/phases/{phase_id}/submit")
    expect(page.locator("#quota")).to_contain_text("4 of 5 left today")
    page.get_by_label("Submission zip").set_input_files(str(archive))
    expect(page.locator("#duplicate")).to_contain_text(f"identical to your submission #{first}")
    shots_at_both_widths(page, "14-submit-form-duplicate")
