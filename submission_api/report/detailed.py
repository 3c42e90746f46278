"""The detailed-results page of one run: a single self-contained HTML file.

Self-contained because it is shown by the server, downloaded by participants and written by
`arena run` on a laptop alike: figures are embedded as PNG data URIs, styles are inline, nothing
is fetched. All text (dataset names, titles, extra fields) is HTML-escaped by Jinja2's
autoescape, since dataset names and titles may come from organizers or participants.

Sections that only some protocols produce appear only when the summary has them: the id-ood
table (BaseGen/ValGen/NovelGen), the FewSTAB table (wAcc-A, wAcc-R, gap), and the
Meta-Dataset interval (for the `meta-dataset` protocol).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

from submission_api.report.figures import (
    plot_bars,
    plot_id_vs_ood_png,
    plot_trend,
    png_data_uri,
)
from submission_api.scoring.intervals import GroupStats
from submission_api.scoring.records import TaskRecord
from submission_api.scoring.summary import (
    FEWSTAB_BIASED,
    FEWSTAB_RANDOM,
    ID_OOD_GROUPS,
    RunSummary,
)

TEMPLATE = "detailed_results.html.j2"


def write_detailed_results(
    summary: RunSummary | Mapping[str, Any],
    records: Sequence[TaskRecord],
    out_path: str | Path,
    title: str = "Detailed results",
    extra: Mapping[str, Any] | None = None,
    *,
    protocol: str | None = None,
    duration_s: float | None = None,
) -> Path:
    """Write the detailed-results HTML page of one run.

    Args:
        summary: `summarize_run(records)`, or its `to_dict()` form (whose `duration_s`, if
            any, is shown when `duration_s` is not given).
        records: the run's scored tasks, shown one row each (sorted by id).
        out_path: file to write (parents are created).
        title: page title.
        extra: more `label -> value` lines for the header table (submission, phase, ...).
        protocol: the phase's protocol name; `meta-dataset` adds the Meta-Dataset interval.
        duration_s: wall-clock duration of the run, shown when given.

    Returns:
        `out_path` as a Path.
    """
    out_path = Path(out_path)
    html = render_detailed_results(
        summary, records, title, extra, protocol=protocol, duration_s=duration_s
    )
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(html, encoding="utf-8")
    return out_path


def render_detailed_results(
    summary: RunSummary | Mapping[str, Any],
    records: Sequence[TaskRecord],
    title: str = "Detailed results",
    extra: Mapping[str, Any] | None = None,
    *,
    protocol: str | None = None,
    duration_s: float | None = None,
    id_vs_ood_points: Sequence[tuple[str, float, float]] | None = None,
) -> str:
    """The page of `write_detailed_results` as a string (for a server to send directly).

    `id_vs_ood_points`: `(label, BaseGen, NovelGen)` per entry for the BaseGen-vs-NovelGen
    scatter (the platform passes the phase's leaderboard); default: this run alone.
    """
    if isinstance(summary, Mapping):
        if duration_s is None and summary.get("duration_s") is not None:
            duration_s = float(summary["duration_s"])
        summary = RunSummary.from_dict(dict(summary))
    context = {
        "title": title,
        "summary": summary,
        "records": sorted(records, key=lambda r: r.id),
        "extra": [(str(k), v) for k, v in (extra or {}).items()],
        "protocol": protocol,
        "duration": format_duration(duration_s) if duration_s is not None else None,
        "show_md_interval": protocol == "meta-dataset",
        "id_ood_rows": [(g, summary.per_group[g]) for g in ID_OOD_GROUPS if g in summary.per_group],
        "fewstab_rows": _fewstab_rows(summary),
        "figures": _figures(summary),
        "id_vs_ood": _id_vs_ood_figure(summary, id_vs_ood_points),
        "headline": _headline(summary),
    }
    return _environment().get_template(TEMPLATE).render(context)


def format_duration(seconds: float) -> str:
    """`3725.4` -> `1 h 02 min 05 s`: short and unambiguous."""
    total = round(seconds)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes:02d} min {secs:02d} s"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{seconds:.1f} s"


def _fewstab_rows(summary: RunSummary) -> list[tuple[str, GroupStats]]:
    labels = {FEWSTAB_BIASED: "wAcc-A (attribute-biased)", FEWSTAB_RANDOM: "wAcc-R (random)"}
    return [
        (labels[g], summary.wacc_per_group[g])
        for g in (FEWSTAB_BIASED, FEWSTAB_RANDOM)
        if g in summary.wacc_per_group
    ]


def _figures(summary: RunSummary) -> list[dict[str, str]]:
    # (groups, plot, x label, caption); a plot takes the groups it is listed with.
    figures: list[tuple[Mapping[Any, GroupStats], Callable[[Any, str], bytes], str, str]] = [
        (summary.per_ways, plot_trend, "ways", "Normalized accuracy vs ways"),
        (summary.per_shots, plot_trend, "shots", "Normalized accuracy vs shots"),
        (summary.per_dataset, plot_bars, "dataset", "Normalized accuracy per dataset"),
    ]
    return [
        {"uri": png_data_uri(plot(groups, xlabel)), "caption": caption}
        for groups, plot, xlabel, caption in figures
        if groups
    ]


def _headline(summary: RunSummary) -> tuple[str, GroupStats] | None:
    """The result a two-sided protocol leads with instead of the mean over all tasks: NovelGen
    (id-ood's default ranking metric), wAcc-A (FewSTAB's)."""
    if "NovelGen" in summary.per_group:
        return "NovelGen: mean normalized balanced accuracy on unseen-class tasks", \
            summary.per_group["NovelGen"]
    if FEWSTAB_BIASED in summary.wacc_per_group:
        return "wAcc-A: worst-class accuracy per attribute-biased task, averaged", \
            summary.wacc_per_group[FEWSTAB_BIASED]
    return None


def _id_vs_ood_figure(summary: RunSummary,
                      points: Sequence[tuple[str, float, float]] | None) -> str | None:
    """Data URI of the BaseGen-vs-NovelGen scatter, when the run has both groups."""
    base, novel = summary.per_group.get("BaseGen"), summary.per_group.get("NovelGen")
    if base is None or novel is None:
        return None
    return png_data_uri(plot_id_vs_ood_png(points or [("this run", base.mean, novel.mean)]))


def _score(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.3f}"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("submission_api.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["score"] = _score
    return env
