"""Reports for people: the self-contained detailed-results page of a run and the ID-vs-OOD
scatter used by the leaderboard. Reads scoring's records and summaries; never computes scores.
"""

from submission_api.report.detailed import (
    format_duration,
    render_detailed_results,
    write_detailed_results,
)
from submission_api.report.figures import plot_id_vs_ood

__all__ = [
    "format_duration",
    "plot_id_vs_ood",
    "render_detailed_results",
    "write_detailed_results",
]
