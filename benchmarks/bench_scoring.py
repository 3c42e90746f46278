"""Scoring speed: `runner.scorer.score_output` on a run of 6,000 prediction files, and
`scoring.summarize_run` alone, against a naive reference.

The answers folder is what the trusted side holds after meta-test: one `task_NNNNN.npy` per task
under `predictions/` (float32 scores `[n_query, n_ways]`, N in 2..20, 20 queries per class, as at
the NeurIPS'22 meta-test), the query labels and `meta_test.json`; the output folder holds the
meta-train stage's `status.json`. The naive
reference loads each file with a plain `np.load`, takes the argmax and calls scikit-learn's
`balanced_accuracy_score(adjusted=True)` (the same normalized score when every class has queries,
as here) in a Python loop; its summary filters the task list once per group value.

    .venv/bin/python benchmarks/bench_scoring.py [--tasks 6000] [--naive-tasks 1500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
from benchlib import measure_best_rates, print_rates, scratch_dir
from scipy import stats
from sklearn.metrics import balanced_accuracy_score

from submission_api.runner.bundle import AnswerTask, read_answers
from submission_api.runner.scorer import score_output
from submission_api.scoring import TaskRecord, summarize_run

QUERIES_PER_CLASS = 20


def write_run(root: Path, n_tasks: int, rng: np.random.Generator) -> tuple[Path, Path]:
    """An output folder (predictions, status) and its answers folder, for `n_tasks` tasks."""
    output, answers = root / "output", root / "answers"
    output.mkdir(parents=True)
    (answers / "predictions").mkdir(parents=True)
    tasks, labels, at = [], [], 0
    for task_id in range(n_tasks):
        n_ways = int(rng.integers(2, 21))
        truth = np.repeat(np.arange(n_ways), QUERIES_PER_CLASS)
        labels.append(truth)
        tasks.append(AnswerTask(task_id, f"dataset{task_id % 10}", "test", n_ways,
                                int(rng.integers(1, 21)), 0, 0, at, len(truth)))
        at += len(truth)
        # Scores biased towards the truth, so that accuracies are spread as in real runs.
        scores = rng.random((len(truth), n_ways), dtype=np.float32)
        scores[np.arange(len(truth)), truth] += rng.random(len(truth), dtype=np.float32)
        np.save(answers / "predictions" / f"task_{task_id:05d}.npy", scores)
    np.save(answers / "query_labels.npy", np.concatenate(labels))
    (answers / "tasks.json").write_text(json.dumps([asdict(t) for t in tasks]))
    (output / "status.json").write_text(json.dumps({"stage": "done", "error": None}))
    (answers / "meta_test.json").write_text(json.dumps({"tasks_done": n_tasks,
                                                        "n_tasks": n_tasks}))
    return output, answers


def score_naive(output: Path, answers: Path, n_tasks: int) -> list[float]:
    """The reference: np.load, argmax, scikit-learn per task, in a plain loop."""
    tasks, labels = read_answers(answers)
    scores = []
    for task in tasks[:n_tasks]:
        predictions = np.load(answers / "predictions" / f"task_{task.id:05d}.npy")
        predicted = predictions.argmax(axis=1) if predictions.ndim == 2 else predictions
        truth = labels[task.query_offset : task.query_offset + task.n_query]
        scores.append(balanced_accuracy_score(truth, predicted, adjusted=True))
    return scores


def summarize_naive(records: Sequence[TaskRecord]) -> dict:
    """The reference summary: one pass over all tasks per group value, scipy's t interval."""
    def stats_of(values: list[float]) -> tuple[float, float]:
        mean = float(np.mean(values))
        if len(values) < 2:
            return mean, math.nan
        low, _ = stats.t.interval(0.95, len(values) - 1, loc=mean, scale=stats.sem(values))
        return mean, mean - low

    summary: dict = {"all": stats_of([r.score for r in records])}
    for key in ("dataset", "n_ways", "n_shots", "group"):
        for value in sorted({getattr(r, key) for r in records}):
            summary[(key, value)] = stats_of([r.score for r in records
                                              if getattr(r, key) == value])
    return summary


def counted(work: Callable[[], object], units: int) -> Callable[[], int]:
    """`work` as a benchmark round that reports `units` done."""
    def round_() -> int:
        work()
        return units
    return round_


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=6000)
    parser.add_argument("--naive-tasks", type=int, default=1500,
                        help="tasks the naive scorer scores per round (it is slow)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with scratch_dir("arena-bench-scoring-") as tmp:
        output, answers = write_run(Path(tmp), args.tasks, np.random.default_rng(0))
        records = score_output(output, answers).records
        ours = [r.score for r in records[: args.naive_tasks]]
        assert np.allclose(ours, score_naive(output, answers, args.naive_tasks)), "scores differ"
        naive_tasks = min(args.naive_tasks, args.tasks)
        rates = measure_best_rates({
            "naive: np.load + sklearn per task": counted(
                lambda: score_naive(output, answers, naive_tasks), naive_tasks),
            "score_output (checks + scores + summary)": counted(
                lambda: score_output(output, answers), args.tasks),
            "naive summary (filter per group)": counted(
                lambda: summarize_naive(records), args.tasks),
            "summarize_run": counted(lambda: summarize_run(records), args.tasks),
        }, rounds=args.rounds)
    print(f"{args.tasks} tasks, float32 scores [20*N, N], N in 2..20")
    print_rates(rates, "tasks")
    naive, fast, naive_summary, summary = rates.values()
    print(f"score_output  / naive scoring  = {fast / naive:6.1f}x")
    print(f"summarize_run / naive summary  = {summary / naive_summary:6.1f}x")
    print(f"score_output on {args.tasks} tasks: {args.tasks / fast:.2f} s at this rate "
          f"(summarize_run {100 * fast / summary:.0f}% of it)")


if __name__ == "__main__":
    main()
