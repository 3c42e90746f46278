"""Small matplotlib figures for the reports, rendered off-screen to PNG.

matplotlib is imported inside the functions, not at module import, so that scoring code that
never draws does not pay for it. Figures are built on `matplotlib.figure.Figure` with the Agg
canvas directly, never through pyplot: no global figure state, no GUI backend, safe in a worker
thread.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from submission_api.scoring.intervals import GroupStats

_DPI = 96
_COLOR = "#3b6ea5"
METRIC_RANGE = (-1.0, 1.0)
"""Normalized accuracy `(bac - 1/N) / (1 - 1/N)` lies in [-1/(N-1), 1], within [-1, 1] for any
N >= 2: an interval reaching past it says nothing more and would stretch the axis (a t interval
of 2 tasks is wide)."""


def _new_figure(width: float, height: float = 3.6) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _to_png(fig: Any, fmt: str = "png") -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format=fmt, metadata={"Software": None} if fmt == "png" else None)
    return buffer.getvalue()


def png_data_uri(png: bytes) -> str:
    """A `data:` URI embedding PNG bytes, so an HTML page needs no side files."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _plain(text: str) -> str:
    """Text shown verbatim: matplotlib would otherwise parse `$...$` as mathtext."""
    return str(text).replace("$", r"\$")


def _half_widths(stats: Sequence[GroupStats]) -> list[float]:
    """Each point's interval half-width; none (0) for a point resting on a single task, whose
    interval is undefined — it must not be drawn as a bar over the whole metric range."""
    return [s.ci95 if s.ci95 is not None and s.n > 1 and math.isfinite(s.ci95) else 0.0
            for s in stats]


def clipped_errors(stats: Sequence[GroupStats],
                   bounds: tuple[float, float] = METRIC_RANGE) -> list[list[float]]:
    """Asymmetric error bars `[below, above]` for matplotlib: each t 95% interval cut to the
    metric's range, so no bar claims a score the metric cannot take."""
    low, high = bounds
    below = [max(0.0, min(h, s.mean - low)) for s, h in zip(stats, _half_widths(stats),
                                                            strict=True)]
    above = [max(0.0, min(h, high - s.mean)) for s, h in zip(stats, _half_widths(stats),
                                                             strict=True)]
    return [below, above]


def _label_counts(ax: Any, xs: Sequence[float], stats: Sequence[GroupStats]) -> None:
    """`n=12` beside each point: how many tasks its mean and interval rest on."""
    for x, s in zip(xs, stats, strict=True):
        ax.annotate(f"n={s.n}", (x, s.mean), fontsize=7, color="#57606a", xytext=(5, 4),
                    textcoords="offset points")


def _fit_axis(ax: Any, stats: Sequence[GroupStats]) -> None:
    """y from just under the lowest interval (or 0) to just over 1: the metric's own range."""
    errors = clipped_errors(stats)
    lowest = min([0.0, *(s.mean - e for s, e in zip(stats, errors[0], strict=True))])
    ax.set_ylim(max(METRIC_RANGE[0], lowest) - 0.05, METRIC_RANGE[1] + 0.05)


def plot_trend(groups: Mapping[int, GroupStats], xlabel: str) -> bytes:
    """Mean normalized accuracy against an integer (ways or shots), with t 95% error bars cut
    to the metric's range and the number of tasks beside each point.

    Returns PNG bytes. A point from a single task has no error bar.
    """
    xs = list(groups)
    stats = [groups[x] for x in xs]
    fig = _new_figure(6.0)
    ax = fig.add_subplot()
    ax.errorbar(
        xs,
        [s.mean for s in stats],
        yerr=clipped_errors(stats),
        fmt="o-",
        color=_COLOR,
        capsize=3,
        markersize=4,
    )
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.margins(x=0.08)  # room for the last point's n= label
    _label_counts(ax, xs, stats)
    _fit_axis(ax, stats)
    ax.axhline(0.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("normalized accuracy")
    ax.grid(alpha=0.3)
    return _to_png(fig)


def plot_bars(groups: Mapping[str, GroupStats], xlabel: str) -> bytes:
    """Mean normalized accuracy per category (e.g. dataset) as bars with t 95% error bars cut
    to the metric's range, and the number of tasks on each bar."""
    names = list(groups)
    stats = [groups[n] for n in names]
    fig = _new_figure(min(14.0, max(6.0, 0.55 * len(names) + 2.0)), 4.0)
    ax = fig.add_subplot()
    positions = list(range(len(names)))
    ax.bar(positions, [s.mean for s in stats], yerr=clipped_errors(stats), color=_COLOR,
           capsize=3)
    _label_counts(ax, positions, stats)
    _fit_axis(ax, stats)
    crowded = len(names) > 4
    ax.set_xticks(
        positions,
        [_plain(n) for n in names],
        fontsize=8,
        rotation=45 if crowded else 0,
        ha="right" if crowded else "center",
    )
    ax.axhline(0.0, color="grey", linewidth=0.8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("normalized accuracy")
    ax.grid(axis="y", alpha=0.3)
    return _to_png(fig)


def compute_ranks(values: Sequence[float]) -> list[int]:
    """1-based competition ranks, higher value first (ties share the better rank)."""
    return [1 + sum(other > v for other in values) for v in values]


def plot_id_vs_ood_png(points: Sequence[tuple[str, float, float]], fmt: str = "png") -> bytes:
    """Scatter each entry's BaseGen (in-distribution) score against its NovelGen
    (out-of-distribution) score (Setlur et al. 2021: two results, never one mean).

    Each point is labelled `label (#id_rank -> #ood_rank)`; points whose rank differs between
    the two are drawn in orange, so ranking flips show at a glance. The diagonal marks equal
    scores.

    Args:
        points: `(label, id_score, ood_score)` per entry.
        fmt: "png" or "svg".
    """
    fig = _new_figure(5.0, 4.5)
    ax = fig.add_subplot()
    id_ranks = compute_ranks([p[1] for p in points])
    ood_ranks = compute_ranks([p[2] for p in points])
    for (label, id_score, ood_score), r_id, r_ood in zip(points, id_ranks, ood_ranks, strict=True):
        color = _COLOR if r_id == r_ood else "#e07b00"
        ax.scatter([id_score], [ood_score], color=color, s=25, zorder=3)
        ax.annotate(
            f"{_plain(label)} (#{r_id}\u2192#{r_ood})",
            (id_score, ood_score),
            fontsize=7,
            xytext=(4, 3),
            textcoords="offset points",
        )
    all_scores = [s for p in points for s in p[1:]] or [0.0, 1.0]
    low, high = min(all_scores + [0.0]) - 0.05, max(all_scores + [1.0]) + 0.05
    ax.plot([low, high], [low, high], color="grey", linewidth=0.8, linestyle="--")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel("BaseGen: ID score (normalized accuracy)")
    ax.set_ylabel("NovelGen: OOD score (normalized accuracy)")
    ax.grid(alpha=0.3)
    return _to_png(fig, fmt)


def plot_id_vs_ood(points: Sequence[tuple[str, float, float]], out_path: str | Path) -> Path:
    """Write `plot_id_vs_ood_png(points)` to `out_path`, in the format of its suffix (png, svg).

    Returns:
        `out_path` as a Path.
    """
    out_path = Path(out_path)
    fmt = out_path.suffix.lstrip(".").lower() or "png"
    if fmt not in ("png", "svg"):
        raise ValueError(
            f"received out_path {str(out_path)!r}; expected a .png or .svg file. "
            "Fix: change the file suffix."
        )
    data = plot_id_vs_ood_png(points, fmt)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_bytes(data)
    return out_path
