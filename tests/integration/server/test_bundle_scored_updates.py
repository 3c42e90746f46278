"""A bundle update may not change what a scored phase measures behind its board (issue 36.2):
with scored entries, a change to the seed, the protocol (task count) or the data is refused
with the entries named, unless the organizer re-runs every entry (`on_scored=rerun`,
`--rerun`) or starts a new phase (`on_scored=new_phase`, `--new-phase`); the dry run says what
the update does to the scores."""

from __future__ import annotations

from sqlalchemy import select
from test_pages import finish

from server.models import Phase, Run

BUNDLE = """slug: scored
title: Scored
phases:
  - name: feedback
    starts_at: 2030-01-01T00:00:00Z
    ends_at: 2030-02-01T00:00:00Z
    seed: 5
    protocol: {name: cross-domain, tasks_per_dataset: 5}
    leaderboard: {statistics: never}
"""
CHANGED = BUNDLE.replace("seed: 5", "seed: 6").replace("tasks_per_dataset: 5",
                                                       "tasks_per_dataset: 7")
URL = "/api/v1/competitions/scored/bundle"


def _scored_world(env) -> tuple[dict, int, int]:
    _, olga = env.user("olga", role="organizer")
    made = env.client.post("/api/v1/competitions/bundle", headers=olga, content=BUNDLE)
    assert made.status_code == 201, made.text
    phase_id = next(p["id"] for p in made.json()["phases"] if p["name"] == "feedback")
    _, ann = env.user("ann")
    sent = env.submit(phase_id, ann)
    assert sent.status_code in (200, 201), sent.text
    submission_id = sent.json()["id"]
    finish(env, submission_id, 0.7)
    return olga, phase_id, submission_id


def _phase(env, phase_id: int) -> Phase:
    with env.db.session() as s:
        phase = s.get_one(Phase, phase_id)
        s.expunge(phase)
        return phase


def test_changing_what_a_scored_phase_measures_is_refused_naming_the_entries(env):
    olga, phase_id, sid = _scored_world(env)
    diff = env.client.post(f"{URL}/diff", headers=olga, content=CHANGED)
    assert diff.status_code == 200, diff.text
    scored = diff.json()["scored"]
    assert scored and scored[0]["submission_ids"] == [sid]
    assert "seed" in scored[0]["fields"] and "protocol.tasks_per_dataset" in scored[0]["fields"]
    refused = env.client.put(URL, headers=olga, content=CHANGED)
    assert refused.status_code == 409, refused.text
    body = refused.text
    assert "bundle.scored_phase_changed" in body and f"#{sid} ann" in body
    assert "--rerun" in body and "--new-phase" in body
    phase = _phase(env, phase_id)
    assert phase.seed == 5 and phase.protocol["tasks_per_dataset"] == 5
    unscored = env.client.put(URL, headers=olga,
                              content=BUNDLE.replace("statistics: never", "statistics: during"))
    assert unscored.status_code == 200, unscored.text  # a display setting needs no choice


def test_rerun_applies_the_change_and_re_runs_every_entry(env):
    olga, phase_id, sid = _scored_world(env)
    sent_before = len(env.queue.jobs)
    done = env.client.put(URL, headers=olga, content=CHANGED, params={"on_scored": "rerun"})
    assert done.status_code == 200, done.text
    assert _phase(env, phase_id).seed == 6
    with env.db.session() as s:
        runs = s.execute(select(Run).where(Run.submission_id == sid)).scalars().all()
        current = [r for r in runs if r.superseded_at is None]
        assert current and all(r.state == "queued" for r in current)
        assert any(r.superseded_at is not None and r.state == "finished" for r in runs)
    assert {job[0] for job in env.queue.jobs[sent_before:]} == {r.id for r in current}


def test_new_phase_keeps_the_scored_board_closed_and_opens_the_new_settings(env):
    olga, phase_id, sid = _scored_world(env)
    done = env.client.put(URL, headers=olga, content=CHANGED, params={"on_scored": "new_phase"})
    assert done.status_code == 200, done.text
    old = _phase(env, phase_id)
    assert old.name == "feedback (v1)" and old.status == "closed" and old.seed == 5
    phases = {p["name"]: p for p in done.json()["phases"]}
    assert phases["feedback"]["id"] != phase_id
    assert _phase(env, phases["feedback"]["id"]).seed == 6
    again = env.client.put(URL, headers=olga, content=CHANGED)  # the archived phase may be absent
    assert again.status_code == 200, again.text
    bad = env.client.put(URL, headers=olga, content=BUNDLE, params={"on_scored": "maybe"})
    assert bad.status_code in (400, 422), bad.text


def test_the_cli_shows_what_the_update_does_to_the_scores_and_takes_rerun(env, monkeypatch,
                                                                          tmp_path):
    from test_bundle_updates import _cli
    from test_cli_participant import _token

    olga, phase_id, sid = _scored_world(env)
    cli, token = _cli(env, monkeypatch), _token(olga)
    path = tmp_path / "competition.yaml"
    path.write_text(CHANGED)
    code, out = cli("competition", "update", str(path), "--yes", token=token)
    flat = " ".join(out.split())
    assert code != 0 and "scores: phase 'feedback' has 1 scored entry" in flat, out
    assert f"#{sid} ann" in flat and "--rerun" in flat, out
    assert _phase(env, phase_id).seed == 5
    code, out = cli("competition", "update", str(path), "--yes", "--rerun", token=token)
    assert code == 0, out
    assert _phase(env, phase_id).seed == 6


def test_a_re_registered_datasets_new_content_hash_is_a_change_of_what_is_measured():
    from server.services.scored_changes import _changed_fields

    ref = {"name": "birds", "content_hash": "a" * 64}
    phase = Phase(name="feedback", seed=5, protocol={"name": "cross-domain"},
                  data={"collection": "c", "meta_test": [ref]})
    same = {"seed": 5, "protocol": {"name": "cross-domain", "run_test_tasks": "shared"},
            "data": {"collection": "c", "meta_test": [dict(ref)]}}
    assert _changed_fields(phase, same) == []  # defaults filled in are no change
    moved = {**same, "data": {"collection": "c",
                              "meta_test": [{"name": "birds", "content_hash": "b" * 64}]}}
    assert _changed_fields(phase, moved) == ["data.meta_test"]
