"""Detailed-results plots (issue 14, item 6): error bars stay inside the metric's range, so a
2-task interval no longer spans -0.7..2.0 and stretches the axis."""

from __future__ import annotations

import pytest

from submission_api.report.figures import METRIC_RANGE, clipped_errors, plot_bars, plot_trend
from submission_api.scoring.intervals import GroupStats


def stats(mean: float, ci95: float | None, n: int) -> GroupStats:
    return GroupStats(mean=mean, ci95=ci95, md_ci95=0.0, n=n)


@pytest.mark.parametrize(("mean", "ci95", "below", "above"), [
    (0.65, 1.35, 1.35, 0.35),   # n = 2: the upper end would be 2.0
    (-0.9, 0.5, 0.1, 0.5),      # the lower end would be -1.4
    (0.5, 0.1, 0.1, 0.1),       # inside: unchanged
    (0.5, None, 0.0, 0.0),      # a single task: no bar
])
def test_error_bars_are_cut_to_the_metric_range(mean, ci95, below, above):
    (low,), (high,) = clipped_errors([stats(mean, ci95, 2)])
    assert (low, high) == pytest.approx((below, above))
    assert mean - low >= METRIC_RANGE[0] and mean + high <= METRIC_RANGE[1]


def test_plots_still_render_with_wide_intervals():
    wide = {2: stats(0.65, 1.35, 2), 5: stats(0.4, 0.05, 40)}
    assert plot_trend(wide, "ways").startswith(b"\x89PNG")
    assert plot_bars({"birds": stats(0.65, 1.35, 2)}, "dataset").startswith(b"\x89PNG")
