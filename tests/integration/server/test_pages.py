"""Web pages: token login sets a safe cookie; every state-changing form needs its CSRF token;
pages escape what people typed, send a strict CSP, and respect who may see what."""

from __future__ import annotations

import re

from _server_support import zip_bytes
from sqlalchemy import func, select

from server.models import Competition, Phase, Run, Submission
from server.services.runs import LeasePolicy, RunOutcome, claim_run, finish_run
from submission_api.scoring.records import TaskRecord
from submission_api.scoring.summary import summarize_run

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def login(env, headers) -> str:
    """Log in through the form; returns the session's CSRF token."""
    token = headers["Authorization"].split()[1]
    form = env.client.get("/login")
    answer = env.client.post("/login", data={"token": token,
                                             "csrf_token": CSRF.search(form.text).group(1)},
                             follow_redirects=False)
    assert answer.status_code == 303
    cookie = answer.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie.replace("Lax", "lax")
    return CSRF.search(env.client.get("/my").text).group(1)


def post_form(env, csrf: str | None):
    data = {"csrf_token": csrf} if csrf else {}
    return env.client.post(f"/phases/{env.phase_id}/submit", data=data, follow_redirects=False,
                           files={"file": ("s.zip", zip_bytes(), "application/zip")})


def count(env) -> int:
    with env.db.session() as s:
        return s.execute(select(func.count(Submission.id))).scalar_one()


def finish(env, submission_id: int, score: float = 0.5) -> None:
    """Claim and finish every current run of a submission through the run service."""
    records = [TaskRecord(id=i, dataset="birds", group="test", n_ways=2, n_shots=1 + i,
                          score=score, accuracy=score, worst_class_accuracy=score)
               for i in range(3)]
    outcome = RunOutcome(state="finished", summary=summarize_run(records).to_dict(),
                         tasks=[{**r.to_dict(), "task_id": r.id} for r in records], log="ok")
    with env.db.session(write=True) as s:
        runs = s.execute(select(Run).where(Run.submission_id == submission_id,
                                           Run.state == "queued")).scalars().all()
        for run in runs:
            token = claim_run(s, run.id, "w", env.clock.now, LeasePolicy()).fencing_token
            finish_run(s, run.id, token, outcome, env.clock.now, LeasePolicy())


def test_login_submit_and_see_the_submission_page(env):
    env.phase_id = env.phase(hide_logs=False).id
    _, headers = env.user("ann")
    csrf = login(env, headers)
    answer = post_form(env, csrf)
    assert answer.status_code == 303, answer.text
    page = env.client.get(answer.headers["location"])
    assert page.status_code == 200 and "queued" in page.text
    assert 'data-live="on"' in page.text
    assert "ann" in env.client.get("/my").text
    assert env.client.get(f"/phases/{env.phase_id}/leaderboard").status_code == 200


def test_submit_form_without_the_right_csrf_token_registers_nothing(env):
    env.phase_id = env.phase().id
    _, headers = env.user("ann")
    login(env, headers)
    assert post_form(env, None).status_code == 403
    assert post_form(env, "0" * 64).status_code == 403
    assert count(env) == 0
    assert not list((env.settings.storage / "tmp").iterdir())


def test_login_form_needs_its_own_csrf_token(env):
    _, headers = env.user("ann")
    token = headers["Authorization"].split()[1]
    env.client.get("/login")
    answer = env.client.post("/login", data={"token": token, "csrf_token": "forged"},
                             follow_redirects=False)
    assert answer.status_code == 403
    assert "arena_session" not in answer.headers.get("set-cookie", "")


def test_cookie_alone_cannot_change_state_through_the_api(env):
    env.phase_id = env.phase().id
    _, headers = env.user("ann")
    login(env, headers)
    answer = env.client.post(f"/api/v1/phases/{env.phase_id}/submissions",
                             files={"file": ("s.zip", zip_bytes(), "application/zip")})
    assert answer.status_code == 401
    assert count(env) == 0


def test_bad_login_token_is_refused(env):
    form = env.client.get("/login")
    answer = env.client.post("/login", data={"token": "nope",
                                             "csrf_token": CSRF.search(form.text).group(1)})
    assert answer.status_code == 401 and "Unknown" in answer.text


def test_pages_escape_what_people_typed_and_send_a_strict_csp(env):
    phase = env.phase(name="<script>alert(1)</script>")
    with env.db.session() as s:
        comp = s.get(Competition, phase.competition_id)
        comp.pages = [{"title": "Rules <i>", "content": "<img src=x onerror=alert(1)>"}]
    for path in ("/", f"/competitions/{phase.competition_id}", f"/phases/{phase.id}"):
        page = env.client.get(path)
        assert page.status_code == 200, path
        assert "<script>alert(1)" not in page.text and "<img src=x" not in page.text
        assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "&lt;img src=x onerror=alert(1)&gt;" in env.client.get(
        f"/competitions/{phase.competition_id}").text


def test_detailed_results_are_inline_for_the_owner_and_hidden_from_others(env):
    phase = env.phase()
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    submission_id = env.submit(phase.id, ann).json()["id"]
    finish(env, submission_id)
    login(env, ann)
    report = env.client.get(f"/submissions/{submission_id}/runs/0/report")
    assert report.status_code == 200
    assert report.headers["content-disposition"].startswith("inline")
    assert report.headers["content-security-policy"].startswith("default-src 'none'")
    assert report.text.count('src="data:image/png;base64,') == 3
    download = env.client.get(f"/submissions/{submission_id}/runs/0/report?download=1")
    assert download.headers["content-disposition"].startswith("attachment")
    env.client.cookies.clear()
    login(env, bob)
    assert env.client.get(f"/submissions/{submission_id}/runs/0/report").status_code == 404
    assert env.client.get(f"/submissions/{submission_id}").status_code == 404


def test_leaderboard_hides_what_the_phase_hides_from_participants_only(env):
    phase = env.phase(leaderboard={"hidden": "scores"})
    _, ann = env.user("ann")
    _, olga = env.user("olga", role="admin")
    finish(env, env.submit(phase.id, ann).json()["id"], score=0.4321)
    page = env.client.get(f"/phases/{phase.id}/leaderboard")
    assert "ann" in page.text and "0.4321" not in page.text and "are withheld" in page.text
    login(env, olga)
    assert "0.4321" in env.client.get(f"/phases/{phase.id}/leaderboard").text


def test_organizer_pages_need_the_role_and_their_forms_need_csrf(env):
    phase = env.phase()
    _, ann = env.user("ann")
    submission_id = env.submit(phase.id, ann).json()["id"]
    finish(env, submission_id)
    login(env, ann)
    assert env.client.get("/organizer").status_code == 403
    answer = env.client.post(f"/submissions/{submission_id}/rerun",
                             data={"csrf_token": CSRF.search(
                                 env.client.get("/my").text).group(1)})
    assert answer.status_code == 404  # not an organizer of this competition
    assert env.client.post(f"/submissions/{submission_id}/select",
                           data={"csrf_token": "forged"}).status_code == 403


def test_static_files_are_served_from_a_fixed_list(env):
    assert env.client.get("/static/arena.css").status_code == 200
    assert env.client.get("/static/arena.js").headers["content-type"].startswith(
        "text/javascript")
    assert env.client.get("/static/..%2Fapp.py").status_code == 404


def test_closing_a_phase_from_the_dashboard_uses_the_close_service(env):
    _, olga = env.user("olga", role="admin")
    phase = env.phase()
    csrf = login(env, olga)
    assert f"/organizer/phases/{phase.id}/close" in env.client.get("/organizer").text
    answer = env.client.post(f"/organizer/phases/{phase.id}/close",
                             data={"csrf_token": csrf}, follow_redirects=False)
    assert answer.status_code == 303
    with env.db.session() as s:
        closed = s.get(Phase, phase.id)
        assert closed.status == "closed" and closed.closed_at is not None
    again = env.client.post(f"/organizer/phases/{phase.id}/close", data={"csrf_token": csrf})
    assert again.status_code == 409 and "already closed" in again.text
