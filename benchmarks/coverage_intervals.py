"""Do the board's 95% intervals cover? A coverage study against fresh test seeds (issue 22).

A fixed synthetic collection (features, not pixels: two meta-test datasets per protocol) is
evaluated by four nearest-centroid learners under the platform's own task plan
(`protocols.plan_test_episodes`) for `--seeds` test seeds. The target of every interval is the
*expected* value over test seeds (the mean over the task distribution of these datasets), taken
as the leave-one-out mean of the other seeds' estimates. An interval covers when it contains it.

Intervals measured, each per (protocol, tasks per dataset, pool rule):
  - per dataset: the t interval of the dataset's task scores (`scoring.intervals`);
  - per run: the interval of the run's score, the mean over datasets of the dataset means,
    stratified (`scoring.ranked_tasks.compute_metric_ci95`, what the board and `arena run`
    show: per-dataset variances, Welch–Satterthwaite degrees of freedom);
  - pooled tasks: the t interval of all the run's tasks pooled (`RunSummary.ci95`, an interval
    of the mean over all tasks; as wide or wider than the stratified one);
  - paired difference: two learners' per-task differences, stratified t interval
    (`scoring.paired.compute_stratified_difference`, what compare / tied groups use);
  - rank range: an entry's bootstrap rank range (`scoring.rank_intervals`) contains its rank
    by expected score (counted per entry and seed); "rank ranges, all" counts a seed when every
    entry's range contains its rank at once; "rank range width" is the mean width (high - low
    + 1) of the ranges, to read beside their coverage.
Pool rules: `per_task` (route b: each task draws afresh from the whole class, the default) and
`per_run` (disjoint pools drawn once per run), for which route (a) is measured too: a crossed
"pigeonhole" bootstrap (Owen 2007) resampling tasks and query images together from per-query
outcomes. `spread` is the standard deviation of the estimates across seeds over the mean
standard error the interval implies (1.0 when the interval is honest).

    .venv/bin/python benchmarks/coverage_intervals.py [--seeds 200] [--pigeonhole-seeds 100]
        [--resamples 200] [--protocols cross-domain meta-dataset] [--workers 1]

Runtime: about 10 minutes on 2 busy cores with the defaults. The table it prints is the one in
docs/statistics.md. Binomial margin of a coverage measured on n seeds: 1.96 * sqrt(.95*.05/n)
(n = 200: ±3.0 points; 100: ±4.3).
"""

from __future__ import annotations

import argparse
import math
from concurrent.futures import ProcessPoolExecutor
from types import SimpleNamespace

import numpy as np
from scipy import sparse

from submission_api.protocols import ProtocolParams, plan_test_episodes
from submission_api.scoring.intervals import compute_group_stats
from submission_api.scoring.paired import compute_stratified_difference
from submission_api.scoring.rank_intervals import compute_rank_intervals, sample_task_weights
from submission_api.scoring.ranked_tasks import compute_metric_ci95

TASKS = (100, 600)
DIM = 8
LEARNERS = ("euclid-8d", "euclid-6d", "cosine-8d", "euclid-5d")
"""Nearest-centroid variants, close enough in skill that their ranks are uncertain."""


def make_collection(protocol: str, seed: int = 7) -> tuple[SimpleNamespace, dict]:
    """Two meta-test datasets as the planner reads them, and their fixed image features.

    cross-domain: 40 classes x 40 images (Meta-Album Mini); meta-dataset: 40 classes of
    20-120 images. Images differ in difficulty (per-image noise scale), so which images a run
    uses as queries matters, as it does on real data."""
    rng = np.random.default_rng(seed)
    datasets, features = {}, {}
    for name in ("alpha", "beta"):
        sizes = (np.full(40, 40) if protocol == "cross-domain"
                 else rng.integers(20, 121, size=40))
        labels = np.repeat(np.arange(40), sizes)
        means = rng.normal(0, 1.1, size=(40, DIM))
        scale = rng.lognormal(0.0, 0.45, size=labels.size)[:, None]
        features[name] = means[labels] + scale * rng.normal(size=(labels.size, DIM))
        datasets[name] = SimpleNamespace(name=name, labels=labels,
                                         class_names=[f"c{i}" for i in range(40)],
                                         super_categories=None, attributes=None)
    collection = SimpleNamespace(name=f"synthetic-{protocol}", datasets=datasets,
                                 splits={"meta-train": [], "meta-test": ["alpha", "beta"]})
    return collection, features


def predict(learner: str, xs: np.ndarray, ys: np.ndarray, xq: np.ndarray, n: int) -> np.ndarray:
    """Nearest-centroid labels of the queries (Snell et al. 2017's prototypes, no training)."""
    dims = int(learner.split("-")[1][:-1])
    xs, xq = xs[:, :dims], xq[:, :dims]
    if learner.startswith("cosine"):
        xs = xs / np.linalg.norm(xs, axis=1, keepdims=True)
        xq = xq / np.linalg.norm(xq, axis=1, keepdims=True)
    counts = np.bincount(ys, minlength=n)[:, None]
    centroids = np.stack([np.bincount(ys, weights=xs[:, j], minlength=n)
                          for j in range(dims)], axis=1) / counts
    distance = (xq ** 2).sum(1)[:, None] - 2 * xq @ centroids.T + (centroids ** 2).sum(1)
    return distance.argmin(axis=1)


def evaluate_seed(job: tuple[str, str, int, int]) -> dict:
    """One test seed: per learner and dataset, task scores and per-query outcomes of the first
    `tasks` tasks of each dataset (the first 100 of a 600-task plan are a 100-task plan)."""
    protocol, pools, seed, tasks = job
    collection, features = make_collection(protocol)
    params = ProtocolParams(name=protocol, tasks_per_dataset=tasks, test_pools=pools)
    out: dict = {}
    for episode in plan_test_episodes(params, collection, test_seed=seed):
        f = features[episode.dataset]
        n = episode.n_ways
        row = out.setdefault(episode.dataset, {"scores": [], "queries": [], "correct": [],
                                               "ways": []})
        row["queries"].append(episode.query_idx)
        row["ways"].append(n)
        correct = []
        for learner in LEARNERS:
            labels = predict(learner, f[episode.support_idx], episode.support_labels,
                             f[episode.query_idx], n)
            correct.append(labels == episode.query_labels)
        row["correct"].append(np.stack(correct))
        # every class has the same number of queries in both protocols, so balanced accuracy
        # is plain accuracy; normalized as (bac - 1/N) / (1 - 1/N)
        acc = np.stack(correct).mean(axis=1)
        row["scores"].append((acc - 1 / n) / (1 - 1 / n))
    return out


def pigeonhole_se(row: dict, n_tasks: int, n_images: int, rng: np.random.Generator,
                  resamples: int) -> tuple[np.ndarray, np.ndarray]:
    """Standard errors of each learner's dataset mean, and of learner 0 − 1's mean difference,
    under a crossed bootstrap: Poisson(1) weights on tasks and, independently, on query images
    (Owen 2007); a task's score is recomputed from its reweighted query outcomes."""
    queries, correct = row["queries"][:n_tasks], row["correct"][:n_tasks]
    ways = np.array(row["ways"][:n_tasks], dtype=float)
    task_of = np.repeat(np.arange(n_tasks), [q.size for q in queries])
    image = np.concatenate(queries)
    hits = np.concatenate(correct, axis=1).astype(float)  # (L, total queries)
    shape = (n_tasks, n_images)
    counts = sparse.csr_matrix((np.ones(image.size), (task_of, image)), shape=shape)
    u = rng.poisson(1.0, size=(n_images, resamples)).astype(float)
    w = rng.poisson(1.0, size=(n_tasks, resamples)).astype(float)
    den = counts @ u
    means = []
    for learner in range(hits.shape[0]):
        num = sparse.csr_matrix((hits[learner], (task_of, image)), shape=shape) @ u
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = np.where(den > 0, num / den, np.nan)
        score = (acc - 1 / ways[:, None]) / (1 - 1 / ways[:, None])
        weight = np.where(np.isnan(score), 0.0, w)
        means.append((np.nan_to_num(score) * weight).sum(0) / weight.sum(0))
    means = np.stack(means)
    return means.std(axis=1, ddof=1), (means[0] - means[1]).std(ddof=1)


def covers(low: float, high: float, target: float) -> bool:
    return low <= target <= high


def study(protocol: str, pools: str, runs: list[dict], n_tasks: int, pigeonhole_seeds: int,
          resamples: int) -> list[dict]:
    """Coverage rows of one (protocol, pool rule, tasks per dataset)."""
    names = sorted(runs[0])
    seeds = len(runs)
    # (S, D, L, T): task scores of every seed, dataset, learner
    scores = np.stack([np.stack([np.stack(run[d]["scores"][:n_tasks], axis=1) for d in names])
                       for run in runs])
    dataset_means = scores.mean(axis=3)  # (S, D, L)
    totals = dataset_means.mean(axis=1)  # (S, L)

    def loo(x: np.ndarray) -> np.ndarray:
        return (x.sum(axis=0, keepdims=True) - x) / (seeds - 1)

    rows: dict[str, list] = {k: [] for k in ("per dataset", "per run", "pooled tasks",
                                             "paired difference", "rank range",
                                             "rank ranges, all", "pigeonhole dataset",
                                             "pigeonhole difference")}
    widths: list[float] = []
    spread: dict[str, list] = {k: [] for k in rows}
    target_d, target_t = loo(dataset_means), loo(totals)
    diff_tasks = scores[:, :, 0] - scores[:, :, 1]  # (S, D, T)
    target_diff = loo(diff_tasks.mean(axis=(1, 2)))
    strata = np.repeat(np.arange(len(names)), n_tasks)
    collection, _ = make_collection(protocol)
    rng = np.random.default_rng([n_tasks, len(pools)])
    for s in range(seeds):
        table = {}
        for d, name in enumerate(names):
            stats = compute_group_stats(scores[s, d, 0])
            table[name] = stats.to_dict()
            rows["per dataset"].append(covers(stats.mean - stats.ci95, stats.mean + stats.ci95,
                                              target_d[s, d, 0]))
            spread["per dataset"].append(stats.ci95 / 1.96)
        half = compute_metric_ci95({"per_dataset": table}, "score")
        assert half is not None
        rows["per run"].append(covers(totals[s, 0] - half, totals[s, 0] + half, target_t[s, 0]))
        spread["per run"].append(half / 1.96)
        pooled = compute_group_stats(scores[s, :, 0].ravel())
        rows["pooled tasks"].append(covers(pooled.mean - pooled.ci95, pooled.mean + pooled.ci95,
                                           target_t[s, 0]))
        spread["pooled tasks"].append(pooled.ci95 / 1.96)
        diff = compute_stratified_difference(diff_tasks[s].ravel(), strata)
        rows["paired difference"].append(covers(diff.low, diff.high, target_diff[s]))
        spread["paired difference"].append((diff.high - diff.low) / 2 / 1.96)
        values = scores[s].transpose(1, 0, 2).reshape(len(LEARNERS), -1)
        order = np.argsort(-totals[s], kind="stable")  # the board order of this seed
        true_rank = np.argsort(np.argsort(-target_t[s][order], kind="stable")) + 1
        low, high = compute_rank_intervals(values[order], sample_task_weights(strata, rng))
        inside = (low <= true_rank) & (true_rank <= high)
        rows["rank range"] += inside.tolist()
        rows["rank ranges, all"].append(bool(inside.all()))
        widths += (high - low + 1).tolist()
        if pools == "per_run" and s < pigeonhole_seeds:
            for d, name in enumerate(names):
                n_images = collection.datasets[name].labels.size
                se, se_diff = pigeonhole_se(runs[s][name], n_tasks, n_images, rng, resamples)
                m = dataset_means[s, d, 0]
                rows["pigeonhole dataset"].append(covers(m - 1.96 * se[0], m + 1.96 * se[0],
                                                         target_d[s, d, 0]))
                spread["pigeonhole dataset"].append(se[0])
                md = diff_tasks[s, d].mean()
                rows["pigeonhole difference"].append(
                    covers(md - 1.96 * se_diff, md + 1.96 * se_diff,
                           loo(diff_tasks.mean(axis=2))[s, d]))
                spread["pigeonhole difference"].append(se_diff)
    observed = {"per dataset": dataset_means[:, :, 0].std(axis=0, ddof=1).mean(),
                "pigeonhole dataset": dataset_means[:, :, 0].std(axis=0, ddof=1).mean(),
                "per run": totals[:, 0].std(ddof=1),
                "pooled tasks": totals[:, 0].std(ddof=1),
                "paired difference": diff_tasks.mean(axis=(1, 2)).std(ddof=1),
                "pigeonhole difference": diff_tasks.mean(axis=2).std(axis=0, ddof=1).mean()}
    out = []
    for kind, hits in rows.items():
        if not hits:
            continue
        n = len(hits)
        ratio = (observed[kind] / np.mean(spread[kind])) if kind in observed else math.nan
        out.append({"protocol": protocol, "tasks": n_tasks, "pools": pools, "interval": kind,
                    "coverage": float(np.mean(hits)), "n": n, "spread": float(ratio),
                    "margin": 1.96 * math.sqrt(0.95 * 0.05 / n)})
    out.append({"protocol": protocol, "tasks": n_tasks, "pools": pools,
                "interval": "rank range width", "coverage": float(np.mean(widths)),
                "n": len(widths), "spread": math.nan, "margin": math.nan})
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--pigeonhole-seeds", type=int, default=100)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--protocols", nargs="+", default=["cross-domain", "meta-dataset"])
    parser.add_argument("--pools", nargs="+", default=["per_task", "per_run"])
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--tasks", type=int, nargs="+", default=list(TASKS),
                        help="tasks per dataset to study (default: 100 and 600)")
    args = parser.parse_args()
    print("| protocol | tasks/dataset | pools | interval | coverage | spread | seeds (±margin) |")
    print("|---|---|---|---|---|---|---|")
    with ProcessPoolExecutor(args.workers) as pool:
        for protocol in args.protocols:
            for rule in args.pools:
                jobs = [(protocol, rule, 1_000 + s, max(args.tasks)) for s in range(args.seeds)]
                runs = list(pool.map(evaluate_seed, jobs, chunksize=4))
                for n_tasks in sorted(args.tasks):
                    for row in study(protocol, rule, runs, n_tasks, args.pigeonhole_seeds,
                                     args.resamples):
                        spread = "" if math.isnan(row["spread"]) else f"{row['spread']:.2f}x"
                        if math.isnan(row["margin"]):  # a mean width, in ranks
                            value, seeds = f"{row['coverage']:.2f} ranks", f"{row['n']}"
                        else:
                            value = f"{100 * row['coverage']:.1f}%"
                            seeds = f"{row['n']} (±{100 * row['margin']:.1f})"
                        print(f"| {row['protocol']} | {row['tasks']} | {row['pools']} | "
                              f"{row['interval']} | {value} | {spread} | {seeds} |", flush=True)


if __name__ == "__main__":
    main()
