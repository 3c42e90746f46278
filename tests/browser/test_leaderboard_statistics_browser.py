"""Leaderboard statistics in a real browser (issue 15): the rank-range column, tied groups
shaded with a legend, and the submission page's comparison with the entry above."""

from __future__ import annotations

import re

import numpy as np
from _browser_support import login, shot, write_zip
from playwright.sync_api import expect

from submission_api.scoring import TaskRecord, summarize_run


def evaluate(arena, scores: np.ndarray) -> None:
    """Finish the next queued run with these per-task scores over two datasets."""
    records = [TaskRecord(id=i, dataset=("birds", "fungi")[i % 2], group="test", n_ways=5,
                          n_shots=1, score=float(s), accuracy=float(s),
                          worst_class_accuracy=float(s)) for i, s in enumerate(scores)]
    worker = arena.worker()
    worker.claim()
    worker.heartbeat("running")
    worker._post("finish", {"fencing_token": worker.fencing, "state": "finished",
                            "summary": summarize_run(records).to_dict(),
                            "tasks": [r.to_dict() for r in records], "log": "done"})


def test_board_shows_rank_ranges_tied_groups_and_the_gap_to_the_entry_above(page, arena,
                                                                              tmp_path):
    organizer = arena.user("olga", role="organizer")
    phase_id = arena.phase(organizer, leaderboard={"statistics": "during"})
    archive = write_zip(tmp_path / "s.zip")
    rng = np.random.default_rng(0)
    tokens, ids = {}, {}
    for name, level in (("ann", 0.80), ("bob", 0.79), ("carl", 0.40)):
        tokens[name] = arena.user(name)
        ids[name] = arena.upload(phase_id, tokens[name], archive)
        evaluate(arena, np.clip(level + rng.normal(0, 0.1, 60), 0, 1))
    login(page, tokens["bob"])
    page.goto(f"/phases/{phase_id}/leaderboard")
    expect(page.locator("table.leaderboard thead th")).to_contain_text(
        ["#", "Rank range", "Participant", "Score"])
    expect(page.locator("td.rank-interval")).to_have_text(["1–2", "1–2", "3–3"])
    expect(page.locator("tr[data-tied-group='1']")).to_have_count(2)
    expect(page.locator("tr[data-tied-group='2']")).to_have_class(re.compile("tied-even"))
    expect(page.locator("#stats-legend-1")).to_contain_text("Tied groups")
    shot(page, "15-leaderboard-statistics")
    page.goto(f"/submissions/{ids['bob']}")
    expect(page.locator("#vs-above")).to_contain_text(
        re.compile(r"vs the entry above you \(ann, rank 1\): [+−]0\.\d{3} \(.+ … .+\), "
                   r"not significant"))
    shot(page, "15-submission-vs-above")
