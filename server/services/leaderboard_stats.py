"""Statistics beside a phase's board: each entry's rank range and tied group (issues 15, 22).

The numbers come from `submission_api.scoring` (`rank_intervals`, `groups`, `paired`); this
module reads each entry's per-task results *of the quantity the phase ranks by*
(`scoring.ranked_tasks`: NovelGen tasks on an id-ood board ranked by NovelGen, per-task wAcc of
the fewstab-A tasks on a FewSTAB board, ...) and decides when they show. An entry's tasks are,
per cell (dataset, or side:dataset), those of its worst run on that cell (MetaDL's per-dataset
minimum; the worst run's tasks under `min_of_run_means`), so the weighted mean of its row is its
official score; only tasks every entry has are compared (one test seed per phase: all).

- Score boards: rank ranges resample tasks within their stratum (each weighing as in the
  score); tied groups test each entry against its group's head with the stratified paired t.
- Average-rank boards: the same task resampling, every dataset re-ranked in each resample, so
  ranges and groups come from the ranks the board orders by.
- What they are intervals of: the expected ranked value on these datasets over fresh test
  seeds (docs/statistics.md, with the coverage study).
- Deterministic: the generator is seeded by the phase id. Cached per (phase, league) while the
  board's fingerprint (`leaderboard_cache.compute_fingerprint`) holds — a finished run moves it.
- Shown per the phase's `leaderboard.statistics`: `during` the phase, `after_close`, or `never`;
  never when the board hides scores from the viewer.
- Flips on id-ood boards (`compute_flip_statistics`): wherever the board marks two entries as
  swapping order between BaseGen and NovelGen, each flip carries both sides' paired differences
  and whether it is significant (`scoring.flips`), whatever `leaderboard.statistics` says: a
  flip is shown with its uncertainty or not at all.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import BindParameter, bindparam, select
from sqlalchemy.orm import Session

from server.models import Phase, Run, Submission, TaskResult, utcnow
from server.services.leaderboard import Ranked
from server.services.leaderboard_cache import FingerprintCache, cached_rank_leaderboard
from server.services.scores import lower_is_better, phase_scoring
from server.services.timeline import effective_status
from submission_api.scoring.flips import compute_flip_difference
from submission_api.scoring.groups import compute_rank_tied_groups, compute_tied_groups
from submission_api.scoring.paired import (
    MIN_CLUSTERS,
    PairedDifference,
    compute_cluster_bootstrap,
    compute_stratified_difference,
    compute_wilcoxon_p,
)
from submission_api.scoring.rank_intervals import (
    compute_rank_intervals,
    compute_rank_ranges,
    compute_resampled_average_ranks,
    sample_task_weights,
)
from submission_api.scoring.ranked_tasks import compute_stratum_weights, compute_task_value

MAX_BOARDS = 16
SEED_SALT = 15
"""Mixed with the phase id into the bootstrap seed, so it never equals a phase's task seed."""

_statistics: FingerprintCache[dict[Any, Any]] = FingerprintCache(MAX_BOARDS)


class EntryStats(NamedTuple):
    rank_low: int
    rank_high: int
    tied_group: int


def shows_statistics(phase: Phase, now: datetime | None = None) -> bool:
    """Whether the phase's setting shows the statistics now."""
    when = (phase.leaderboard or {}).get("statistics", "never")
    if when == "during":
        return True
    return when == "after_close" and effective_status(phase, now or utcnow()) == "closed"


def read_task_matrix(session: Session, submission_ids: list[int], metric: str = "score",
                     aggregation: str = "per_dataset_min") -> dict[int, dict[Any, Any]]:
    """submission id -> {(group, task_id): (stratum, value)} of the ranked `metric`, per cell
    from its worst current finished run (the whole worst run under `min_of_run_means`)."""
    if not submission_ids:
        return {}
    ids: BindParameter[int] = bindparam("ids", submission_ids, expanding=True,
                                        literal_execute=True)
    rows = session.execute(
        select(Run.submission_id, Run.id, TaskResult.group, TaskResult.task_id,
               TaskResult.dataset, TaskResult.score, TaskResult.worst_class_accuracy)
        .join(TaskResult, TaskResult.run_id == Run.id)
        .where(Run.submission_id.in_(ids), Run.state == "finished",
               Run.superseded_at.is_(None))).all()
    runs: dict[int, dict[int, dict[str, dict[Any, Any]]]] = {}
    for sid, run_id, group, task_id, dataset, score, wacc in rows:
        cell = compute_task_value(metric, group, dataset, score, wacc)
        if cell is not None:
            runs.setdefault(sid, {}).setdefault(run_id, {}).setdefault(cell[0], {})[
                (group, task_id)] = cell[1:]
    worse = max if metric == "wAcc-gap" else min
    out: dict[int, dict[Any, Any]] = {}
    for sid, by_run in runs.items():
        if aggregation == "min_of_run_means":
            worst = worse(by_run.values(), key=lambda cells: _cells_value(cells.values()))
            out[sid] = {k: v for tasks in worst.values() for k, v in tasks.items()}
            continue
        chosen: dict[Any, Any] = {}
        for key in sorted({k for cells in by_run.values() for k in cells}):
            own = [cells[key] for cells in by_run.values() if key in cells]
            chosen |= worse(own, key=lambda tasks: _cells_value([tasks]))
        out[sid] = chosen
    return out


def _cells_value(cells: Any) -> float:
    """The metric's value over some cells' tasks: per stratum the mean, summed within a cell
    (wAcc-gap's two sides carry their signs), averaged over cells."""
    totals = []
    for tasks in cells:
        strata: dict[str, list[float]] = {}
        for stratum, value in tasks.values():
            strata.setdefault(stratum, []).append(value)
        totals.append(sum(sum(v) / len(v) for v in strata.values()))
    return sum(totals) / len(totals)


class _Board(NamedTuple):
    values: np.ndarray  # (E, n) per-task ranked values, board order
    strata: np.ndarray  # (n,)
    weight: np.ndarray | None  # (n,) stratum weights, None: equal


def read_board(session: Session, phase: Phase, ids: list[int]) -> _Board | None:
    """The entries' shared tasks of the ranked quantity, or None when there is none."""
    _, metric, aggregation = phase_scoring(phase)
    tasks = read_task_matrix(session, ids, metric, aggregation)
    if not ids or any(sid not in tasks for sid in ids):
        return None
    shared = sorted(set.intersection(*(set(tasks[sid]) for sid in ids)))
    if not shared:
        return None
    values = np.array([[tasks[sid][key][1] for key in shared] for sid in ids])
    strata = np.array([tasks[ids[0]][key][0] for key in shared])
    return _Board(values, strata, compute_stratum_weights(strata, metric))


def compute_board_statistics(session: Session, phase: Phase,
                             ranked: list[Ranked]) -> dict[int, EntryStats]:
    """submission id -> its rank range and tied group, for the whole ranked board.

    Empty when fewer than two entries share a task."""
    ids = [r.row.id for r in ranked]
    board = read_board(session, phase, ids) if len(ids) >= 2 else None
    if board is None:
        return {}
    higher = not lower_is_better(phase_scoring(phase))
    rng = np.random.default_rng([phase.id, SEED_SALT])
    weights = sample_task_weights(board.strata, rng, stratum_weight=board.weight)
    if (phase.leaderboard or {}).get("ranking") == "average_rank":
        ranks = compute_resampled_average_ranks(board.values, board.strata, weights, higher)
        low, high = compute_rank_ranges(ranks, higher_is_better=False)
        groups = compute_rank_tied_groups(ranks)
    else:
        low, high = compute_rank_intervals(board.values, weights, higher)
        groups = compute_tied_groups(board.values, board.strata, board.weight)
    return {sid: EntryStats(int(lo), int(hi), int(g))
            for sid, lo, hi, g in zip(ids, low, high, groups, strict=True)}


def compute_flip_statistics(session: Session, phase: Phase, flips: dict[int, list[int]]
                            ) -> dict[int, dict[int, dict[Any, Any]]]:
    """submission id -> {other id: `FlipDifference.to_dict()` of id − other} for each flipped
    pair of `flips` (`aggregate.compute_order_flips`' answer); a pair without shared tasks on
    a side (summaries stored without per-task results) is left out."""
    ids = sorted({sid for sid, others in flips.items() if others}
                 | {o for others in flips.values() for o in others})
    if not ids:
        return {}
    aggregation = phase_scoring(phase).aggregation
    tasks = {side: read_task_matrix(session, ids, side, aggregation)
             for side in ("BaseGen", "NovelGen")}

    def shared(side: str, a: int, b: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        mine, theirs = tasks[side].get(a, {}), tasks[side].get(b, {})
        keys = sorted(mine.keys() & theirs.keys())
        if not keys:
            return None
        return (np.array([mine[k][1] for k in keys]), np.array([theirs[k][1] for k in keys]),
                np.array([mine[k][0] for k in keys]))

    out: dict[int, dict[int, dict[Any, Any]]] = {}
    for sid, others in flips.items():
        for other in others:
            base, novel = shared("BaseGen", sid, other), shared("NovelGen", sid, other)
            if base is not None and novel is not None:
                out.setdefault(sid, {})[other] = compute_flip_difference(base, novel).to_dict()
    return out


def cached_board_statistics(session: Session, phase: Phase, league: str | None,
                            ranked: list[Ranked]) -> dict[int, EntryStats]:
    """`compute_board_statistics`, reused while the phase's board fingerprint holds."""
    return _statistics.get(session, phase, league,
                           lambda: compute_board_statistics(session, phase, ranked))


def compare_submissions(session: Session, phase: Phase, a: int, b: int
                        ) -> PairedDifference | None:
    """Paired difference a − b of the phase's ranked quantity over the tasks both have (each
    stratum weighing as in the score); None if nothing is shared."""
    board = read_board(session, phase, [a, b])
    if board is None:
        return None
    return compute_stratified_difference(board.values[0] - board.values[1], board.strata,
                                         board.weight)


def compare_with_entry_above(session: Session, phase: Phase, league: str | None,
                             submission_id: int) -> dict[Any, Any] | None:
    """The submission's paired difference from the board entry right above it, as the
    submission page shows it; None when it is first, not on the board, or nothing is shared."""
    board = cached_rank_leaderboard(session, phase, league)
    index = next((i for i, r in enumerate(board) if r.row.id == submission_id), None)
    if not index:
        return None
    above = board[index - 1].row
    diff = compare_submissions(session, phase, submission_id, above.id)
    if diff is None:
        return None
    return {"username": above.username, "rank": board[index - 1].position, "mean": diff.mean,
            "low": diff.low, "high": diff.high, "p_value": diff.p_value, "n": diff.n,
            "significant": diff.significant}


def describe_comparison(session: Session, phase: Phase, a: int, b: int) -> dict[Any, Any] | None:
    """`arena compare`'s answer: a − b of the ranked quantity with its stratified t interval
    over tasks (an interval of the expected difference on these datasets over fresh test
    seeds), and — only with `MIN_CLUSTERS` datasets or more — a bootstrap over datasets (would
    it hold on other datasets like these); with fewer, `dataset_note` says why there is none.
    None if nothing is shared."""
    board = read_board(session, phase, [a, b])
    if board is None:
        return None
    diff = board.values[0] - board.values[1]
    t = compute_stratified_difference(diff, board.strata, board.weight)
    datasets = np.array([s.split(":", 1)[-1] for s in board.strata.astype(str)])
    n_datasets = int(np.unique(datasets).size)
    answer = {"a": a, "b": b, "n_tasks": t.n, "n_datasets": n_datasets, "mean": t.mean,
              "t_low": t.low, "t_high": t.high, "p_value": t.p_value,
              "significant": t.significant, "bootstrap_low": None, "bootstrap_high": None,
              "wilcoxon_p": compute_wilcoxon_p(diff), "metric": phase_scoring(
                  phase).metric, "dataset_note": None}
    if n_datasets >= MIN_CLUSTERS:
        low, high = compute_cluster_bootstrap(diff, datasets, np.random.default_rng(
            [phase.id, SEED_SALT, a, b]))
        answer |= {"bootstrap_low": low, "bootstrap_high": high}
    else:
        answer["dataset_note"] = (
            f"{n_datasets} test dataset(s): too few for an interval over datasets (a bootstrap "
            f"over them has a handful of distinct resamples; at least {MIN_CLUSTERS} needed). "
            "The interval above holds for these datasets, not for other datasets like them.")
    return answer


def board_submission_ids(session: Session, phase: Phase, league: str | None) -> set[int]:
    """Ids of the submissions standing on the board (one league, or the whole phase)."""
    return {r.row.id for r in cached_rank_leaderboard(session, phase, league)}


def compare_with_previous(session: Session, submission: Any) -> dict[Any, Any] | None:
    """The submission against its owner's previous finished submission in the same phase."""
    previous = session.execute(
        select(Submission.id).where(
            Submission.phase_id == submission.phase_id, Submission.user_id == submission.user_id,
            Submission.state == "finished", Submission.id != submission.id,
            Submission.created_at <= submission.created_at)
        .order_by(Submission.created_at.desc(), Submission.id.desc()).limit(1)).scalar()
    phase = session.get_one(Phase, submission.phase_id)
    diff = compare_submissions(session, phase, submission.id, previous) if previous else None
    if diff is None:
        return None
    return {"submission_id": previous, "mean": diff.mean, "low": diff.low, "high": diff.high,
            "p_value": diff.p_value, "n": diff.n, "significant": diff.significant}
