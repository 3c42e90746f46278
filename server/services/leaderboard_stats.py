"""Statistics beside a phase's board: each entry's rank interval and tied group (issue 15).

The numbers come from `submission_api.scoring.paired`; this module only reads the per-task
results of each entry and decides when they show. An entry's tasks are, per dataset, those of
its worst run on that dataset (MetaDL's per-dataset minimum), so the mean of its row is its
official score; only tasks every entry has are compared (with one test seed per phase, all).

- Score phases: rank intervals resample tasks within their dataset (each dataset weighs the
  same, as the score); average-rank phases resample datasets, ranking per dataset as the board.
- Tied groups: adjacent entries, paired t-test over tasks, Holm-corrected along the board.
- Deterministic: the generator is seeded by the phase id. Cached per (phase, league) while the
  board's fingerprint (`leaderboard_cache.compute_fingerprint`) holds — a finished run moves it.
- Shown per the phase's `leaderboard.statistics`: `during` the phase, `after_close`, or `never`;
  never when the board hides scores from the viewer.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session

from server.models import Phase, Run, Submission, TaskResult, utcnow
from server.services.leaderboard import Ranked
from server.services.leaderboard_cache import FingerprintCache, cached_rank_leaderboard
from server.services.scores import lower_is_better
from server.services.timeline import effective_status
from submission_api.scoring.paired import (
    N_RESAMPLES,
    PairedDifference,
    align_tasks,
    compute_cluster_bootstrap,
    compute_dataset_ranks,
    compute_paired_difference,
    compute_rank_intervals,
    compute_tied_groups,
    compute_wilcoxon_p,
    sample_task_weights,
)

MAX_BOARDS = 16
SEED_SALT = 15
"""Mixed with the phase id into the bootstrap seed, so it never equals a phase's task seed."""

_statistics: FingerprintCache[dict] = FingerprintCache(MAX_BOARDS)


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


def read_task_matrix(session: Session, submission_ids: list[int]) -> dict[int, dict]:
    """submission id -> {(group, task_id): (dataset, score)} from, per dataset, its worst
    current finished run."""
    if not submission_ids:
        return {}
    ids = bindparam("ids", submission_ids, expanding=True, literal_execute=True)
    rows = session.execute(
        select(Run.submission_id, Run.id, TaskResult.group, TaskResult.task_id,
               TaskResult.dataset, TaskResult.score)
        .join(TaskResult, TaskResult.run_id == Run.id)
        .where(Run.submission_id.in_(ids), Run.state == "finished",
               Run.superseded_at.is_(None))).all()
    runs: dict[int, dict[int, dict[str, dict]]] = {}
    for sid, run_id, group, task_id, dataset, score in rows:
        runs.setdefault(sid, {}).setdefault(run_id, {}).setdefault(dataset, {})[
            (group, task_id)] = (dataset, float(score))
    out: dict[int, dict] = {}
    for sid, by_run in runs.items():
        datasets = {d for tasks in by_run.values() for d in tasks}
        chosen: dict = {}
        for dataset in sorted(datasets):
            own = [tasks[dataset] for tasks in by_run.values() if dataset in tasks]
            chosen |= min(own, key=lambda t: sum(s for _, s in t.values()) / len(t))
        out[sid] = chosen
    return out


def compute_board_statistics(session: Session, phase: Phase,
                             ranked: list[Ranked]) -> dict[int, EntryStats]:
    """submission id -> its rank interval and tied group, for the whole ranked board.

    Empty when fewer than two entries share a task."""
    ids = [r.row.id for r in ranked]
    tasks = read_task_matrix(session, ids)
    if len(ids) < 2 or any(sid not in tasks for sid in ids):
        return {}
    shared = sorted(set.intersection(*(set(tasks[sid]) for sid in ids)))
    if not shared:
        return {}
    values = np.array([[tasks[sid][key][1] for key in shared] for sid in ids])
    strata = np.array([tasks[ids[0]][key][0] for key in shared])
    higher = not lower_is_better(phase.protocol)
    rng = np.random.default_rng([phase.id, SEED_SALT])
    if (phase.leaderboard or {}).get("ranking") == "average_rank":
        names, label = np.unique(strata, return_inverse=True)
        sums = np.stack([np.bincount(label, weights=row) for row in values])
        ranks = compute_dataset_ranks(sums / np.bincount(label), higher)
        drawn = rng.integers(0, names.size, size=(N_RESAMPLES, names.size))
        weights = np.stack([np.bincount(row, minlength=names.size) for row in drawn]) / names.size
        low, high = compute_rank_intervals(ranks, weights, higher_is_better=False)
    else:
        low, high = compute_rank_intervals(values, sample_task_weights(strata, rng), higher)
    groups, _ = compute_tied_groups(values)
    return {sid: EntryStats(int(lo), int(hi), int(g))
            for sid, lo, hi, g in zip(ids, low, high, groups, strict=True)}


def cached_board_statistics(session: Session, phase: Phase, league: str | None,
                            ranked: list[Ranked]) -> dict[int, EntryStats]:
    """`compute_board_statistics`, reused while the phase's board fingerprint holds."""
    return _statistics.get(session, phase, league,
                           lambda: compute_board_statistics(session, phase, ranked))


def compare_submissions(session: Session, a: int, b: int) -> PairedDifference | None:
    """Paired difference a − b over the tasks both submissions have (None if none shared)."""
    tasks = read_task_matrix(session, [a, b])
    if a not in tasks or b not in tasks:
        return None
    scores_a, scores_b = align_tasks({k: v[1] for k, v in tasks[a].items()},
                                     {k: v[1] for k, v in tasks[b].items()})
    return compute_paired_difference(scores_a, scores_b) if scores_a.size else None


def compare_with_entry_above(session: Session, phase: Phase, league: str | None,
                             submission_id: int) -> dict | None:
    """The submission's paired difference from the board entry right above it, as the
    submission page shows it; None when it is first, not on the board, or nothing is shared."""
    board = cached_rank_leaderboard(session, phase, league)
    index = next((i for i, r in enumerate(board) if r.row.id == submission_id), None)
    if not index:
        return None
    above = board[index - 1].row
    diff = compare_submissions(session, submission_id, above.id)
    if diff is None:
        return None
    return {"username": above.username, "rank": board[index - 1].position, "mean": diff.mean,
            "low": diff.low, "high": diff.high, "p_value": diff.p_value, "n": diff.n,
            "significant": diff.significant}


def describe_comparison(session: Session, phase: Phase, a: int, b: int) -> dict | None:
    """`arena compare`'s answer: a − b with its t interval over tasks and a bootstrap interval
    resampling datasets (tasks share images, so the t interval is optimistic; the dataset
    bootstrap is the conservative one, and wide with few datasets). None if nothing shared."""
    tasks = read_task_matrix(session, [a, b])
    if a not in tasks or b not in tasks:
        return None
    shared = sorted(tasks[a].keys() & tasks[b].keys())
    if not shared:
        return None
    diff = np.array([tasks[a][k][1] - tasks[b][k][1] for k in shared])
    t = compute_paired_difference(diff, np.zeros_like(diff))
    datasets = np.array([tasks[a][k][0] for k in shared])
    low, high = compute_cluster_bootstrap(diff, datasets, np.random.default_rng(
        [phase.id, SEED_SALT, a, b]))
    return {"a": a, "b": b, "n_tasks": t.n, "n_datasets": int(np.unique(datasets).size),
            "mean": t.mean, "t_low": t.low, "t_high": t.high, "p_value": t.p_value,
            "significant": t.significant, "bootstrap_low": low, "bootstrap_high": high,
            "wilcoxon_p": compute_wilcoxon_p(diff)}


def board_submission_ids(session: Session, phase: Phase, league: str | None) -> set[int]:
    """Ids of the submissions standing on the board (one league, or the whole phase)."""
    return {r.row.id for r in cached_rank_leaderboard(session, phase, league)}


def compare_with_previous(session: Session, submission: Any) -> dict | None:
    """The submission against its owner's previous finished submission in the same phase."""
    previous = session.execute(
        select(Submission.id).where(
            Submission.phase_id == submission.phase_id, Submission.user_id == submission.user_id,
            Submission.state == "finished", Submission.id != submission.id,
            Submission.created_at <= submission.created_at)
        .order_by(Submission.created_at.desc(), Submission.id.desc()).limit(1)).scalar()
    diff = compare_submissions(session, submission.id, previous) if previous else None
    if diff is None:
        return None
    return {"submission_id": previous, "mean": diff.mean, "low": diff.low, "high": diff.high,
            "p_value": diff.p_value, "n": diff.n, "significant": diff.significant}
