"""Rank intervals and tied groups on the board (issue 15): in the JSON and CSV exports when the
phase shows them (during, after close, never), computed from the entries' per-task results."""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest
from sqlalchemy import select
from test_pages import login

from server.models import Phase, Run, TaskResult
from server.services.runs import LeasePolicy, RunOutcome, claim_run, finish_run
from submission_api.scoring import TaskRecord, summarize_run


def finish_tasks(env, submission_id: int, scores: list[float]) -> None:
    """Finish every queued run of a submission with these per-task scores (two datasets)."""
    records = [TaskRecord(id=i, dataset=("birds", "fungi")[i % 2], group="test", n_ways=2,
                          n_shots=1, score=s, accuracy=s, worst_class_accuracy=s)
               for i, s in enumerate(scores)]
    outcome = RunOutcome(state="finished", summary=summarize_run(records).to_dict(),
                         tasks=[{**r.to_dict(), "task_id": r.id} for r in records], log="ok")
    with env.db.session(write=True) as s:
        runs = s.execute(select(Run).where(Run.submission_id == submission_id,
                                           Run.state == "queued")).scalars().all()
        for run in runs:
            token = claim_run(s, run.id, "w", env.clock.now, LeasePolicy()).fencing_token
            finish_run(s, run.id, token, outcome, env.clock.now, LeasePolicy())


def three_entries(env, statistics: str) -> int:
    """ann and bob within noise of each other, carl far below."""
    phase_id = env.phase(leaderboard={"statistics": statistics}).id
    rng = np.random.default_rng(0)
    env.headers, env.submission_ids = {}, {}
    for name, level in (("ann", 0.80), ("bob", 0.79), ("carl", 0.40)):
        _, headers = env.user(name)
        env.clock.advance(seconds=1)
        sid = env.submit(phase_id, headers).json()["id"]
        finish_tasks(env, sid, list(np.clip(level + rng.normal(0, 0.1, 60), 0, 1)))
        env.headers[name], env.submission_ids[name] = headers, sid
    return phase_id


def test_pages_show_the_rank_range_tied_shading_and_the_gap_to_the_entry_above(env):
    phase_id = three_entries(env, "during")
    page = env.client.get(f"/phases/{phase_id}/leaderboard").text
    assert "Rank range" in page and 'id="stats-legend-1"' in page
    assert page.count('data-tied-group="1"') == 2 and page.count('data-tied-group="2"') == 1
    assert "1–2" in page and "3–3" in page
    login(env, env.headers["bob"])
    own = env.client.get(f"/submissions/{env.submission_ids['bob']}").text
    assert 'id="vs-above"' in own and "vs the entry above you (ann, rank 1)" in own
    assert "not significant" in own
    env.client.cookies.clear()
    login(env, env.headers["carl"])
    own = env.client.get(f"/submissions/{env.submission_ids['carl']}").text
    assert "vs the entry above you (bob, rank 2): <strong>−0." in own
    assert "), significant" in own


def test_board_shows_rank_intervals_and_tied_groups_during_the_phase(env):
    phase_id = three_entries(env, "during")
    board = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()
    assert board["statistics"] is True
    rows = [(e["username"], e["rank_low"], e["rank_high"], e["tied_group"])
            for e in board["entries"]]
    assert [r[0] for r in rows] == ["ann", "bob", "carl"]
    assert rows[0][1:3] == (1, 2) and rows[1][1:3] == (1, 2) and rows[2][1:3] == (3, 3)
    assert [r[3] for r in rows] == [1, 1, 2]
    again = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()
    assert again["entries"] == board["entries"]  # seeded by the phase: deterministic

    text = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard?format=csv").text
    table = list(csv.DictReader(io.StringIO(text)))
    assert [(r["rank_low"], r["rank_high"], r["tied_group"]) for r in table] == [
        ("1", "2", "1"), ("1", "2", "1"), ("3", "3", "2")]


@pytest.mark.parametrize("statistics", ["never", "after_close"])
def test_board_without_statistics_has_no_interval_columns(env, statistics):
    phase_id = three_entries(env, statistics)
    board = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()
    assert board["statistics"] is False
    assert all(e.get("rank_low") is None and e.get("tied_group") is None
               for e in board["entries"])
    text = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard?format=csv").text
    assert "rank_low" not in text.splitlines()[0]


def test_after_close_shows_them_once_the_phase_is_closed(env):
    phase_id = three_entries(env, "after_close")
    with env.db.session(write=True) as s:
        s.get(Phase, phase_id).status = "closed"
    board = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()
    assert board["statistics"] is True and board["entries"][2]["tied_group"] == 2


def test_average_rank_boards_resample_datasets(env):
    phase_id = env.phase(leaderboard={"statistics": "during", "ranking": "average_rank"}).id
    rng = np.random.default_rng(1)
    for name, level in (("ann", 0.80), ("bob", 0.79), ("carl", 0.40)):
        _, headers = env.user(name)
        env.clock.advance(seconds=1)
        sid = env.submit(phase_id, headers).json()["id"]
        finish_tasks(env, sid, list(np.clip(level + rng.normal(0, 0.1, 60), 0, 1)))
    entries = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()["entries"]
    assert (entries[2]["username"], entries[2]["rank_low"], entries[2]["rank_high"]) == (
        "carl", 3, 3)
    assert entries[0]["rank_low"] == 1 and [e["tied_group"] for e in entries] == [1, 1, 2]


def test_submission_page_compares_with_the_owners_previous_submission(env):
    phase_id = three_entries(env, "during")
    env.clock.advance(seconds=1)
    again = env.submit(phase_id, env.headers["carl"]).json()["id"]
    finish_tasks(env, again, list(np.full(60, 0.9)))
    login(env, env.headers["carl"])
    page = env.client.get(f"/submissions/{again}").text
    assert f'vs your previous submission (<a href="/submissions/{env.submission_ids["carl"]}">' \
        in page
    assert "<strong>+0." in page.split('id="vs-previous"')[1] and "), significant" in page


def finish_groups(env, submission_id: int, groups: dict[str, tuple[float, float]],
                  rng: np.random.Generator, n: int = 60) -> None:
    """Finish a submission's runs with `n` tasks per group: group -> (score level, wAcc level);
    each group on its own dataset, as an id-ood or FewSTAB run reports them."""
    records, next_id = [], 0
    for group, (score, wacc) in groups.items():
        for s, w in zip(np.clip(score + rng.normal(0, 0.05, n), 0, 1),
                        np.clip(wacc + rng.normal(0, 0.05, n), 0, 1), strict=True):
            records.append(TaskRecord(id=next_id, dataset=f"d-{group}", group=group, n_ways=5,
                                      n_shots=1, score=float(s), accuracy=float(s),
                                      worst_class_accuracy=float(w)))
            next_id += 1
    finish_records(env, submission_id, records)


def finish_records(env, submission_id: int, records: list[TaskRecord]) -> None:
    """Finish every queued run of a submission with these task records."""
    outcome = RunOutcome(state="finished", summary=summarize_run(records).to_dict(),
                         tasks=[{**r.to_dict(), "task_id": r.id} for r in records], log="ok")
    with env.db.session(write=True) as s:
        for run in s.execute(select(Run).where(Run.submission_id == submission_id,
                                               Run.state == "queued")).scalars().all():
            token = claim_run(s, run.id, "w", env.clock.now, LeasePolicy()).fencing_token
            finish_run(s, run.id, token, outcome, env.clock.now, LeasePolicy())


def two_sided_board(env, protocol: dict, levels: dict[str, dict]) -> tuple[int, dict]:
    phase_id = env.phase(protocol=protocol, leaderboard={"statistics": "during"}).id
    rng = np.random.default_rng(2)
    ids = {}
    for name, groups in levels.items():
        _, headers = env.user(name)
        env.clock.advance(seconds=1)
        ids[name] = env.submit(phase_id, headers).json()["id"]
        finish_groups(env, ids[name], groups, rng)
    return phase_id, ids


def test_id_ood_statistics_are_of_novelgen_the_quantity_the_board_ranks_by(env):
    # ann leads on BaseGen and on the mean over all tasks; bob leads on NovelGen, which ranks
    phase_id, ids = two_sided_board(env, {"name": "id-ood"}, {
        "ann": {"BaseGen": (0.9, 0.9), "NovelGen": (0.2, 0.2)},
        "bob": {"BaseGen": (0.5, 0.5), "NovelGen": (0.4, 0.4)}})
    entries = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()["entries"]
    assert [e["username"] for e in entries] == ["bob", "ann"]
    assert entries[0]["rank_low"] == 1  # was 2–2: the range came from every task's score
    assert (entries[0]["rank_high"], entries[1]["rank_low"], entries[1]["rank_high"]) == (1, 2, 2)
    assert [e["tied_group"] for e in entries] == [1, 2]
    with env.db.session() as s:
        summary = s.execute(select(Run.summary).where(Run.submission_id == ids["bob"])).scalar()
    assert entries[0]["ci95"] == pytest.approx(summary["per_group"]["NovelGen"]["ci95"])
    answer = env.client.get(f"/api/v1/submissions/{ids['bob']}/compare/{ids['ann']}")
    assert answer.status_code == 200, answer.text
    comparison = answer.json()
    assert comparison["metric"] == "NovelGen" and comparison["n_tasks"] == 60
    assert comparison["mean"] == pytest.approx(0.2, abs=0.03) and comparison["significant"]
    assert comparison["bootstrap_low"] is None and "too few" in comparison["dataset_note"]


def test_fewstab_statistics_are_of_wacc_a_not_of_the_score(env):
    # ann has the better normalized accuracy everywhere, bob the better worst-class accuracy on
    # the attribute-biased tasks, which is what a FewSTAB board ranks by (wAcc-A)
    phase_id, _ = two_sided_board(env, {"name": "fewstab"}, {
        "ann": {"fewstab-A": (0.9, 0.1), "fewstab-R": (0.9, 0.5)},
        "bob": {"fewstab-A": (0.3, 0.4), "fewstab-R": (0.3, 0.5)}})
    entries = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()["entries"]
    assert [e["username"] for e in entries] == ["bob", "ann"]
    assert [(e["rank_low"], e["rank_high"], e["tied_group"]) for e in entries] == [
        (1, 1, 1), (2, 2, 2)]


def test_id_ood_flips_carry_both_sides_paired_intervals_and_say_whether_significant(env):
    # ann vs bob: a real flip (0.4 apart on BaseGen, 0.2 on NovelGen); carl is bob + 0.003 on
    # BaseGen and bob − 0.003 on NovelGen with ±0.05 per-task jitter: an observed flip within
    # the noise of 60 tasks
    phase_id, ids = two_sided_board(env, {"name": "id-ood"}, {
        "ann": {"BaseGen": (0.9, 0.9), "NovelGen": (0.2, 0.2)},
        "bob": {"BaseGen": (0.5, 0.5), "NovelGen": (0.4, 0.4)}})
    with env.db.session() as s:
        run_id = s.execute(select(Run.id).where(Run.submission_id == ids["bob"])).scalar()
        bob_tasks = s.execute(select(TaskResult).where(TaskResult.run_id == run_id)
                              .order_by(TaskResult.task_id)).scalars().all()
        jitter = np.tile([0.05, -0.05], len(bob_tasks) // 2)
        carl_records = [TaskRecord(t.task_id, t.dataset, t.group, 5, 1, score, score, score)
                        for t, j in zip(bob_tasks, jitter, strict=True)
                        for score in [float(t.score + j + (0.003 if t.group == "BaseGen"
                                                           else -0.003))]]
    _, headers = env.user("carl")
    ids["carl"] = env.submit(phase_id, headers).json()["id"]
    finish_records(env, ids["carl"], carl_records)
    entries = {e["username"]: e for e in env.client.get(
        f"/api/v1/phases/{phase_id}/leaderboard").json()["entries"]}
    bob = {f["other"]: f for f in entries["bob"]["flip_stats"]}
    assert set(bob) == set(entries["bob"]["flips"]) == {ids["ann"], ids["carl"]}
    real = bob[ids["ann"]]
    assert real["significant"] and real["base"]["n"] == real["novel"]["n"] == 60
    assert real["base"]["high"] < 0 < real["novel"]["low"]  # bob − ann: behind, then ahead
    assert real["base"]["mean"] == pytest.approx(
        entries["bob"]["sides"]["BaseGen"] - entries["ann"]["sides"]["BaseGen"])
    noise = bob[ids["carl"]]
    assert noise["base"]["mean"] == pytest.approx(-0.003) and not noise["significant"]
    assert noise["base"]["low"] < 0 < noise["base"]["high"]
    page = env.client.get(f"/phases/{phase_id}/leaderboard").text
    assert "&#8645; 2, 1 significant" in page and "not significant" in page
