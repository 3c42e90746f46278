"""Leaderboard statistics checked against independent computations: SciPy's paired t-test and
slow, loop-by-loop bootstraps drawing the same random numbers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats

from submission_api.scoring.groups import (
    compute_holm,
    compute_rank_tied_groups,
    compute_tied_groups,
    group_by_heads,
)
from submission_api.scoring.paired import (
    align_tasks,
    compute_cluster_bootstrap,
    compute_paired_difference,
    compute_stratified_difference,
    compute_wilcoxon_p,
)
from submission_api.scoring.rank_intervals import (
    compute_dataset_ranks,
    compute_rank_intervals,
    compute_resampled_average_ranks,
    sample_task_weights,
)
from submission_api.scoring.student_t import compute_t_quantile, compute_t_two_sided_p

# Scores on a coarse grid so that ties (equal scores, equal differences) are frequent.
scores = st.integers(0, 20).map(lambda k: k / 20)


def score_pairs(min_size: int = 2):
    return st.integers(min_size, 40).flatmap(lambda n: st.tuples(
        arrays(float, n, elements=scores), arrays(float, n, elements=scores)))


@settings(max_examples=200, deadline=None)
@given(score_pairs())
def test_paired_difference_matches_scipy_ttest_rel(pair):
    a, b = pair
    result = compute_paired_difference(a, b)
    diff = a - b
    assert result.mean == pytest.approx(diff.mean(), abs=1e-12)
    if np.ptp(diff) == 0:  # SciPy gives NaN here; a constant gap is certain, none is nothing
        assert result.p_value == (1.0 if diff[0] == 0 else 0.0)
        assert result.low == result.high == pytest.approx(diff[0])
        return
    expected = stats.ttest_rel(a, b)
    assert result.p_value == pytest.approx(expected.pvalue, rel=1e-7, abs=1e-12)
    low, high = stats.t.interval(0.95, len(a) - 1, loc=diff.mean(), scale=stats.sem(diff))
    assert (result.low, result.high) == pytest.approx((low, high), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("df", [1, 2, 5, 29, 999, 5999])
def test_student_t_tail_and_quantile_match_scipy(df):
    t = np.array([0.0, 0.1, 1.0, 2.5, 10.0, -3.0, 40.0])
    assert compute_t_two_sided_p(t, df) == pytest.approx(2 * stats.t.sf(np.abs(t), df), abs=1e-11)
    assert compute_t_quantile(0.95, df) == pytest.approx(stats.t.ppf(0.975, df), rel=1e-10)


def test_align_tasks_keeps_only_shared_ids_in_id_order():
    a, b = align_tasks({3: 0.3, 1: 0.1, 7: 0.7}, {1: 0.5, 3: 0.2, 9: 0.9})
    assert a.tolist() == [0.1, 0.3] and b.tolist() == [0.5, 0.2]


def test_paired_difference_refuses_no_shared_task():
    with pytest.raises(ValueError, match="align_tasks"):
        compute_paired_difference(np.array([]), np.array([]))


def test_single_task_has_a_point_interval():
    result = compute_paired_difference(np.array([0.7]), np.array([0.5]))
    assert (result.mean, result.low, result.high, result.n) == pytest.approx((0.2, 0.2, 0.2, 1))


@settings(max_examples=60, deadline=None)
@given(arrays(float, st.integers(1, 30), elements=scores), st.integers(1, 6),
       st.integers(0, 2**32 - 1))
def test_cluster_bootstrap_matches_slow_reference(diff, n_clusters, seed):
    clusters = np.arange(diff.size) % n_clusters
    low, high = compute_cluster_bootstrap(diff, clusters, np.random.default_rng(seed), 200)
    rng = np.random.default_rng(seed)
    labels = np.unique(clusters)
    drawn = rng.integers(0, labels.size, size=(200, labels.size))
    means = [np.concatenate([diff[clusters == labels[c]] for c in row]).mean() for row in drawn]
    assert (low, high) == pytest.approx((np.quantile(means, 0.025), np.quantile(means, 0.975)))


def _reference_scores(values, strata, seed, n_resamples):
    """Each resample's score per entry: redraw tasks within each dataset, mean of dataset means."""
    rng = np.random.default_rng(seed)
    labels = np.unique(strata)
    members = [np.flatnonzero(strata == d) for d in labels]
    draws = [rng.integers(0, m.size, size=(n_resamples, m.size)) for m in members]
    pairs = list(zip(members, draws, strict=True))
    return np.array([[np.mean([values[e, m[draw[b]]].mean() for m, draw in pairs])
                      for b in range(n_resamples)] for e in range(values.shape[0])])


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6), st.integers(2, 15), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_rank_intervals_match_slow_reference(n_entries, n_tasks, n_datasets, seed):
    values = np.random.default_rng(seed + 1).integers(0, 5, size=(n_entries, n_tasks)) / 4
    strata = np.arange(n_tasks) % n_datasets
    weights = sample_task_weights(strata, np.random.default_rng(seed), 50)
    low, high = compute_rank_intervals(values, weights)
    totals = _reference_scores(values, strata, seed, 50)
    ranks = np.empty_like(totals, dtype=int)
    for b in range(50):  # ties to the entry higher on the board
        order = sorted(range(n_entries), key=lambda e: (-round(totals[e, b], 10), e))
        ranks[order, b] = np.arange(1, n_entries + 1)
    assert low.tolist() == [int(np.quantile(r, 0.025, method="lower")) for r in ranks]
    assert high.tolist() == [int(np.quantile(r, 0.975, method="higher")) for r in ranks]


def test_two_entries_far_apart_never_swap_ranks():
    values = np.vstack([np.full(100, 0.9), np.full(100, 0.1)])
    weights = sample_task_weights(np.zeros(100), np.random.default_rng(0), 100)
    low, high = compute_rank_intervals(values, weights)
    assert low.tolist() == [1, 2] and high.tolist() == [1, 2]


@settings(max_examples=100, deadline=None)
@given(arrays(float, st.tuples(st.integers(1, 8), st.integers(1, 5)),
              elements=st.one_of(scores, st.just(np.nan))))
def test_dataset_ranks_average_ties_and_put_missing_datasets_last(per_dataset):
    ranks = compute_dataset_ranks(per_dataset)
    key = np.where(np.isnan(per_dataset), np.inf, -per_dataset)
    for d in range(per_dataset.shape[1]):
        assert ranks[:, d] == pytest.approx(stats.rankdata(key[:, d], method="average"))


@settings(max_examples=100, deadline=None)
@given(arrays(float, st.integers(1, 12), elements=st.floats(0, 1)))
def test_holm_matches_its_definition(p):
    m = p.size
    ordered = np.sort(p)
    expected_sorted = [min(1.0, max((m - j) * ordered[j] for j in range(k + 1))) for k in range(m)]
    adjusted = compute_holm(p)
    assert np.sort(adjusted) == pytest.approx(expected_sorted)
    assert all(adjusted >= p)


def test_tied_groups_split_only_at_significant_gaps():
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.05, size=(4, 400))
    values = np.array([[0.80], [0.80], [0.50], [0.50]]) + noise
    assert compute_tied_groups(values).tolist() == [1, 1, 2, 2]


def test_tied_groups_do_not_chain_every_member_is_tested_against_its_head():
    # 0.80, 0.79, 0.78, 0.77: each adjacent pair is indistinguishable, but the last is
    # clearly below the leader; chaining adjacent pairs made all four one group.
    rng = np.random.default_rng(15)
    values = (np.array([[0.80], [0.79], [0.78], [0.77]]) + rng.normal(0, 0.1, size=(1, 100))
              + rng.normal(0, 0.05, size=(4, 100)))
    adjacent = [compute_paired_difference(values[i], values[i + 1]).p_value for i in range(3)]
    assert min(adjacent) > 0.05
    groups = compute_tied_groups(values)
    assert groups[0] == 1 and groups[-1] != 1
    for member in np.flatnonzero(groups == 1)[1:]:
        assert compute_paired_difference(values[0], values[member]).p_value > 0.05 / 3


@pytest.mark.parametrize("n_entries", [0, 1])
def test_tied_groups_of_a_board_without_pairs(n_entries):
    assert compute_tied_groups(np.zeros((n_entries, 5))).tolist() == [1] * n_entries


def test_identical_entries_are_one_group():
    assert compute_tied_groups(np.tile(np.linspace(0, 1, 50), (3, 1))).tolist() == [1, 1, 1]


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 8), st.integers(2, 30), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_tied_groups_match_a_slow_reference(n_entries, n_tasks, n_strata, seed):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 5, size=(n_entries, n_tasks)) / 4
    strata = np.arange(n_tasks) % n_strata
    slow = group_by_heads(n_entries, lambda head, others: np.array([
        compute_stratified_difference(values[head] - values[o], strata).p_value
        for o in others]))
    assert compute_tied_groups(values, strata).tolist() == slow.tolist()


def test_tied_groups_weigh_datasets_as_the_score_does():
    # entry 1 is far worse on a small dataset only: pooled over tasks it hides in the big one
    rng = np.random.default_rng(4)
    strata = np.array([0] * 400 + [1] * 20)
    base = rng.normal(0.6, 0.1, size=420)
    worse = base - np.where(strata == 1, 0.3, 0.0) + rng.normal(0, 0.02, size=420)
    values = np.vstack([base, worse])
    assert compute_tied_groups(values, strata).tolist() == [1, 2]


def test_average_rank_groups_come_from_the_ranks_the_board_orders_by():
    rng = np.random.default_rng(5)
    strata = np.arange(300) % 3
    values = np.array([[0.8], [0.8], [0.3]]) + rng.normal(0, 0.05, size=(3, 300))
    weights = sample_task_weights(strata, rng, 400)
    ranks = compute_resampled_average_ranks(values, strata, weights)
    assert compute_rank_tied_groups(ranks).tolist() == [1, 1, 2]


def test_resampled_average_ranks_match_a_slow_reference():
    rng = np.random.default_rng(6)
    strata = np.arange(40) % 4
    values = rng.integers(0, 4, size=(5, 40)) / 3
    weights = sample_task_weights(strata, rng, 30)
    fast = compute_resampled_average_ranks(values, strata, weights)
    for b in range(30):
        means = np.array([[np.average(values[e, strata == d], weights=weights[b, strata == d])
                           for d in range(4)] for e in range(5)])
        means = np.round(means, 10)  # tied means stay tied whatever order they summed in
        expected = np.mean([stats.rankdata(-means[:, d]) for d in range(4)], axis=0)
        assert fast[:, b] == pytest.approx(expected)


@settings(max_examples=100, deadline=None)
@given(score_pairs(min_size=3))
def test_stratified_difference_of_one_stratum_is_the_paired_t_test(pair):
    a, b = pair
    plain = compute_paired_difference(a, b)
    one = compute_stratified_difference(a - b, np.zeros(a.size))
    assert (one.mean, one.low, one.high) == pytest.approx((plain.mean, plain.low, plain.high),
                                                          abs=1e-10)
    assert one.p_value == pytest.approx(plain.p_value, abs=1e-9)


def test_stratified_difference_matches_welch_for_two_strata():
    # two strata of equal weight: the mean of two means, Welch–Satterthwaite df (SciPy)
    rng = np.random.default_rng(7)
    x, y = rng.normal(0.1, 1.0, 30), rng.normal(-0.2, 3.0, 12)
    result = compute_stratified_difference(np.concatenate([x, y]),
                                           np.array([0] * 30 + [1] * 12))
    se2 = (x.var(ddof=1) / 30 + y.var(ddof=1) / 12) / 4
    df = se2 ** 2 / ((x.var(ddof=1) / 30 / 4) ** 2 / 29 + (y.var(ddof=1) / 12 / 4) ** 2 / 11)
    mean = (x.mean() + y.mean()) / 2
    half = stats.t.ppf(0.975, df) * np.sqrt(se2)
    assert (result.low, result.high) == pytest.approx((mean - half, mean + half), rel=1e-9)
    assert result.p_value == pytest.approx(2 * stats.t.sf(abs(mean) / np.sqrt(se2), df),
                                           rel=1e-8)


@settings(max_examples=200, deadline=None)
@given(score_pairs(min_size=1))
def test_wilcoxon_matches_scipy_signed_rank_approximation(pair):
    a, b = pair
    diff = a - b
    if not np.any(diff != 0):
        assert compute_wilcoxon_p(diff) == 1.0
        return
    expected = stats.wilcoxon(diff, zero_method="wilcox", correction=False, method="approx")
    assert compute_wilcoxon_p(diff) == pytest.approx(expected.pvalue, rel=1e-9, abs=1e-12)
