"""The local detailed-results report in Chromium (issue 24, trap 12): each plot's caption sits
above its plot, a point resting on one task has no error bar, the page fits a 400 px phone
with a site header, and it says that 0 is chance and 1 perfect."""

from __future__ import annotations

from _browser_support import ARTIFACTS
from playwright.sync_api import expect

from submission_api.report import write_detailed_results
from submission_api.report.figures import clipped_errors
from submission_api.scoring.intervals import GroupStats
from submission_api.scoring.records import TaskRecord
from submission_api.scoring.summary import summarize_run

NAMES = ("a_dataset_with_a_rather_long_meta_album_name", "insects", "plankton_microscopy")


def _records() -> list[TaskRecord]:
    return [TaskRecord(id=i, dataset=NAMES[i % 3], group="test", n_ways=2 + i % 7,
                       n_shots=1 + i % 5, score=0.2 + 0.05 * (i % 9), accuracy=0.6,
                       worst_class_accuracy=0.3) for i in range(40)]


def test_a_point_from_one_task_has_no_error_bar():
    lonely = GroupStats(mean=0.4, ci95=float("inf"), md_ci95=0.0, n=1)
    wide = GroupStats(mean=0.4, ci95=3.0, md_ci95=0.0, n=1)
    assert clipped_errors([lonely, wide]) == [[0.0, 0.0], [0.0, 0.0]]


def test_the_local_report_fits_a_phone_with_captions_above_plots(browser, tmp_path):
    records = _records()
    path = tmp_path / "detailed_results.html"
    write_detailed_results(summarize_run(records), records, path)
    context = browser.new_context(viewport={"width": 400, "height": 900})
    page = context.new_page()
    page.goto(path.as_uri())
    expect(page.locator("header.site")).to_contain_text("MetaDL Arena")
    expect(page.locator("#scale")).to_contain_text("0 is chance")
    expect(page.locator("#scale")).to_contain_text("1 is perfect")
    figures = page.locator("#plots figure")
    assert figures.count() == 3
    for i in range(3):
        first = figures.nth(i).evaluate("f => f.firstElementChild.tagName")
        assert first == "FIGCAPTION", f"figure {i}: the caption is not above its plot"
    width = page.evaluate("document.documentElement.scrollWidth")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "24-local-report-400px.png"), full_page=True)
    assert width <= 400, f"the report is {width} px wide at 400 px"
    context.close()
