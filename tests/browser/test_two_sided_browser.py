"""Two-sided protocols in a real browser (issue 12, item 4): an id-ood leaderboard shows BaseGen
and NovelGen columns and marks the entries whose order flips between them; the detailed results
page shows the BaseGen-vs-NovelGen plot; a FewSTAB board shows wAcc-A, wAcc-R and the gap."""

from __future__ import annotations

import re

from _browser_support import login, shot, write_zip
from playwright.sync_api import expect

from submission_api.scoring import TaskRecord, summarize_run

DATASET = {"BaseGen": "birds", "NovelGen": "plankton", "ValGen": "insects"}


def outcome(groups: dict[str, float]) -> dict:
    """A finished run with one task per (group, dataset), FewSTAB wAcc as its worst class."""
    records = [TaskRecord(id=i, dataset=DATASET.get(group, "spurious"), group=group, n_ways=5,
                          n_shots=1, score=value, accuracy=value, worst_class_accuracy=value)
               for i, (group, value) in enumerate(groups.items())]
    return {"state": "finished", "summary": summarize_run(records).to_dict(),
            "tasks": [r.to_dict() for r in records], "log": "done"}


def evaluate(arena, groups: dict[str, float]) -> None:
    worker = arena.worker()
    worker.claim()
    worker.heartbeat("running")
    worker._post("finish", {"fencing_token": worker.fencing, **outcome(groups)})


def test_id_ood_board_shows_both_results_marks_flips_and_the_report_plots_them(page, arena,
                                                                                  tmp_path):
    organizer = arena.user("olga", role="organizer")
    phase_id = arena.phase(organizer, protocol={"name": "id-ood"})
    archive = write_zip(tmp_path / "s.zip")
    ann = arena.upload(phase_id, arena.user("ann"), archive)
    evaluate(arena, {"BaseGen": 0.9, "NovelGen": 0.2, "ValGen": 0.5})
    arena.upload(phase_id, arena.user("bob"), archive)
    evaluate(arena, {"BaseGen": 0.5, "NovelGen": 0.4, "ValGen": 0.5})
    login(page, organizer)
    page.goto(f"/phases/{phase_id}/leaderboard")
    names = page.locator("table.leaderboard tbody tr td:nth-child(2)")
    expect(names).to_have_text([re.compile("bob"), re.compile("ann")])  # ranked by NovelGen
    expect(page.locator("table.leaderboard thead th")).to_contain_text(
        ["#", "Participant", "Score", "95% CI", "BaseGen", "NovelGen"])
    expect(page.locator("span.flip", has_text="1")).to_have_count(2)
    expect(page.locator("#sides-note")).to_contain_text("two results, not one mean")
    shot(page, "12-id-ood-leaderboard")
    page.goto(f"/submissions/{ann}/runs/0/report", timeout=60_000)  # plots render server-side
    expect(page.locator("#id-vs-ood-figure img")).to_be_visible()
    expect(page.locator("#id-ood-ValGen")).to_contain_text("snapshot")
    shot(page, "12-id-ood-report")


def test_fewstab_board_shows_wacc_a_wacc_r_and_the_gap(page, arena, tmp_path):
    organizer = arena.user("olga", role="organizer")
    phase_id = arena.phase(organizer, protocol={"name": "fewstab"})
    arena.upload(phase_id, arena.user("ann"), write_zip(tmp_path / "s.zip"))
    evaluate(arena, {"fewstab-A": 0.3, "fewstab-R": 0.6})
    login(page, organizer)
    page.goto(f"/phases/{phase_id}/leaderboard")
    expect(page.locator("table.leaderboard thead th")).to_contain_text(
        ["wAcc-A", "wAcc-R", "wAcc-gap"])
    expect(page.locator("table.leaderboard tbody td.side")).to_have_text(
        ["0.300", "0.600", "0.300"])
    shot(page, "12-fewstab-leaderboard")
