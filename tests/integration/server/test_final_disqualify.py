"""A disqualified submission cannot win the final (issue 32 finding 3), through the JSON API of
the real app on SQLite and Postgres: disqualifying follows every carried copy (and a copy's
disqualification marks its origin), cancels their waiting runs and takes them off every board,
with a reason required; publishing a final while its runs are pending is refused with the counts
(`phase.runs_pending`); a phase with nothing withheld has nothing to publish; an upcoming phase
opens now from the dashboard. Each test fails at a55d28d (no disqualify route, no refusal, the
copy ran on and topped the final)."""

from __future__ import annotations

from datetime import timedelta

from test_team_finals import _finished, _web

from server.models import Competition, Phase, Run


def _final_world(env, runs: int = 2):
    org, olga = env.user("olga", role="organizer")
    phase = env.phase(owner=org)
    with env.db.session() as s:
        final = Phase(competition_id=phase.competition_id, name="final", status="open",
                      runs_per_submission=runs, carry_from_id=phase.id,
                      created_at=env.clock.now)
        s.add(final)
        s.flush()
        final_id = final.id
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    cheat = _finished(env, phase.id, ann, b"# labels\n", "Oracle", 0.9)
    honest = _finished(env, phase.id, bob, b"# fair\n", "ProtoNet", 0.6)
    closed = env.client.post(f"/api/v1/phases/{phase.id}/close", headers=olga)
    assert closed.status_code == 200, closed.text
    copies = {}
    for sid in closed.json()["carried"][str(final_id)]:
        copy = env.client.get(f"/api/v1/submissions/{sid}", headers=olga).json()
        copies[copy["note"].rsplit(" ", 1)[1]] = copy
    return {"olga": olga, "ann": ann, "bob": bob, "phase_id": phase.id, "final_id": final_id,
            "cheat": cheat, "honest": honest, "cheat_copy": copies[str(cheat)]["id"],
            "honest_copy": copies[str(honest)]["id"]}


def _finish_all(env, submission_id: int, score: float) -> None:
    from test_teams import finish

    with env.db.session() as s:
        ids = [r.id for r in s.query(Run).filter(Run.submission_id == submission_id,
                                                 Run.state == "queued")]
    for run_id in ids:
        finish(env, run_id, score)


def _disqualify(env, headers, sid: int, reason: str = "used the test labels", **extra):
    return env.client.post(f"/api/v1/submissions/{sid}/disqualify", headers=headers,
                           json={"reason": reason, **extra})


def test_disqualifying_after_the_carry_follows_the_copy_and_stops_its_runs(env):
    w = _final_world(env)
    olga = w["olga"]
    blank = _disqualify(env, olga, w["cheat"], reason="  ")
    assert blank.status_code == 422 and blank.json()["error"]["code"] == \
        "disqualify.reason_required"
    assert _disqualify(env, w["ann"], w["cheat"]).status_code in (403, 404)
    done = _disqualify(env, olga, w["cheat"])
    assert done.status_code == 200, done.text
    copy = env.client.get(f"/api/v1/submissions/{w['cheat_copy']}", headers=w["ann"]).json()
    assert copy["disqualified_reason"] == "used the test labels"
    assert copy["state"] == "cancelled" and {r["state"] for r in copy["runs"]} == {"cancelled"}
    _finish_all(env, w["honest_copy"], 0.5)
    board = env.client.get(f"/api/v1/phases/{w['final_id']}/leaderboard", headers=olga).json()
    assert [e["submission_id"] for e in board["entries"]] == [w["honest_copy"]]
    feedback = env.client.get(f"/api/v1/phases/{w['phase_id']}/leaderboard").json()
    assert [e["submission_id"] for e in feedback["entries"]] == [w["honest"]]
    published = env.client.post(f"/api/v1/phases/{w['final_id']}/close", headers=olga)
    assert published.status_code == 200, published.text
    published = env.client.post(f"/api/v1/phases/{w['final_id']}/publish", headers=olga)
    assert published.status_code == 200, published.text
    public = env.client.get(f"/api/v1/phases/{w['final_id']}/leaderboard").json()
    assert [e["submission_id"] for e in public["entries"]] == [w["honest_copy"]]


def test_disqualifying_a_copy_marks_its_origin_and_reinstating_restores_both(env):
    w = _final_world(env)
    assert _disqualify(env, w["olga"], w["honest_copy"], reason="broke the rules").json()[
        "disqualified_reason"] == "broke the rules"
    origin = env.client.get(f"/api/v1/submissions/{w['honest']}", headers=w["bob"]).json()
    assert origin["disqualified_reason"] == "broke the rules"
    back = _disqualify(env, w["olga"], w["honest"], reason="", disqualified=False)
    assert back.status_code == 200 and back.json()["disqualified_at"] is None
    copy = env.client.get(f"/api/v1/submissions/{w['honest_copy']}", headers=w["bob"]).json()
    assert copy["disqualified_at"] is None and copy["state"] == "cancelled"  # re-run it


def test_publishing_a_final_with_pending_runs_is_refused_with_the_counts(env):
    w = _final_world(env, runs=2)
    olga = w["olga"]
    assert env.client.post(f"/api/v1/phases/{w['final_id']}/close",
                           headers=olga).status_code == 200
    refused = env.client.post(f"/api/v1/phases/{w['final_id']}/publish", headers=olga)
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "phase.runs_pending"
    assert error["details"]["pending_runs"] == 4 and error["details"]["queued"] == 4
    assert "4 run(s) pending (4 queued, 0 running)" in error["message"]
    _finish_all(env, w["cheat_copy"], 0.9)
    again = env.client.post(f"/api/v1/phases/{w['final_id']}/publish",
                            headers=olga).json()["error"]
    assert again["details"]["pending_runs"] == 2
    assert again["details"]["submission_ids"] == [w["honest_copy"]]
    _finish_all(env, w["honest_copy"], 0.5)
    assert env.client.post(f"/api/v1/phases/{w['final_id']}/publish",
                           headers=olga).status_code == 200
    public = env.client.post(f"/api/v1/phases/{w['phase_id']}/publish", headers=olga)
    assert public.status_code == 409  # a public phase: nothing is withheld, nothing to publish
    assert public.json()["error"]["code"] == "phase.results_public"


def test_the_dashboard_offers_open_now_and_publish_only_where_they_apply(env):
    w = _final_world(env)
    with env.db.session() as s:
        comp_id = s.get(Phase, w["phase_id"]).competition_id
        later = Phase(competition_id=comp_id, name="later", status="open",
                      starts_at=env.clock.now + timedelta(days=3), runs_per_submission=1,
                      created_at=env.clock.now)
        s.add(later)
        s.flush()
        later_id = later.id
        assert s.get(Competition, comp_id) is not None
    web = _web(env, w["olga"])
    page = web.get("/organizer").text
    assert f'action="/organizer/phases/{later_id}/open"' in page and "Open now" in page
    assert f'/organizer/phases/{w["phase_id"]}/publish' not in page  # public: nothing withheld
    assert "Reopen phase dev?" in page  # the Reopen button asks first
    csrf = page.split('name="csrf_token" value="', 1)[1].split('"', 1)[0]
    opened = web.post(f"/organizer/phases/{later_id}/open", data={"csrf_token": csrf})
    assert opened.status_code == 303 and "phase-opened-now" in opened.headers["location"]
    with env.db.session() as s:
        assert s.get(Phase, later_id).starts_at == env.clock.now
