"""Tied groups beside a board: which entries a paired test cannot tell apart from a group head.

Meaning, in one sentence (shown under the board): *group 1 holds the leader and every entry
that a paired test, Holm-corrected, cannot distinguish from the leader; each next group is led
by the best entry not yet grouped and holds the ungrouped entries indistinguishable from it.*
So "tied with the leader" is exactly group 1, and a group never chains: every member was tested
against its head. Groups may interleave along the board (a noisy entry low on the board can
still be indistinguishable from the leader); the official order is never changed.

The test is on the ranked quantity:
- score boards (`compute_tied_groups`): the stratified paired t-test of each entry against the
  head (`paired.compute_stratified_test`), each dataset (or side) weighing as in the
  score;
- average-rank boards (`compute_rank_tied_groups`): the bootstrap distribution of the
  difference in average rank (`rank_intervals.compute_resampled_average_ranks`), two-sided
  p = 2 min(P(d <= 0), P(d >= 0)) — the same ranks the board orders by.
Within a group's tests (head vs each ungrouped entry below it) Holm's correction holds the
family-wise error at `ALPHA`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from submission_api.scoring.paired import ALPHA, compute_strata, compute_stratified_test

GROUPS_MEANING = (
    "Group 1 is the leader and every entry a paired test (Holm-corrected, 5%) cannot tell apart "
    "from it; each next group is led by the best entry not yet grouped, with the entries that "
    "cannot be told apart from that one.")


def compute_holm(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values (step-down; monotone, at most 1), in input order."""
    p = np.asarray(p, dtype=float)
    m = p.size
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def group_by_heads(n_entries: int, p_against: Callable[[int, np.ndarray], np.ndarray],
                   alpha: float = ALPHA) -> np.ndarray:
    """(E,) group ids from 1 (module docstring); `p_against(head, others)` gives the p-values of
    the head against each of `others` (entry indices, board order)."""
    groups = np.zeros(n_entries, dtype=int)
    group = 0
    while (groups == 0).any():
        ungrouped = np.flatnonzero(groups == 0)
        head, others = ungrouped[0], ungrouped[1:]
        group += 1
        groups[head] = group
        if others.size:
            adjusted = compute_holm(p_against(int(head), others))
            groups[others[adjusted >= alpha]] = group
    return groups


def compute_tied_groups(values: np.ndarray, strata: np.ndarray | None = None,
                        stratum_weight: np.ndarray | None = None,
                        alpha: float = ALPHA) -> np.ndarray:
    """Tied groups of a score board.

    Args:
        values: (E, n) per-task values of the ranked quantity, entries in board order.
        strata / stratum_weight: as `paired.compute_stratified_difference` (default: one
            stratum).
    Returns:
        (E,) group ids starting at 1.
    """
    values = np.asarray(values, dtype=float)
    strata = np.zeros(values.shape[1], dtype=int) if strata is None else np.asarray(strata)
    label, sizes, share = compute_strata(strata, stratum_weight)
    one_hot = np.zeros((label.size, sizes.size))
    one_hot[np.arange(label.size), label] = 1.0
    # per-stratum sums and sums of squares once; a head's cross products are one product, so
    # no (E, n) difference matrix is built per group
    sums, squares = values @ one_hot, (values ** 2) @ one_hot  # (E, S)

    def p_against(head: int, others: np.ndarray) -> np.ndarray:
        cross = values[others] @ (one_hot * values[head][:, None])  # (k, S)
        # rounded: BLAS sums equal rows in different orders (1e-15 apart); a real difference
        # of per-task scores is never below 1e-9
        diff_sums = np.round(sums[head] - sums[others], 9)
        diff_squares = squares[head] + squares[others] - 2.0 * cross
        var = np.maximum(diff_squares - diff_sums ** 2 / sizes, 0.0) / np.maximum(sizes - 1, 1)
        # tied task by task: exactly no variance, whatever the rounding above left
        var = np.where(np.isclose(var, 0.0, atol=1e-13), 0.0, var)
        return compute_stratified_test(diff_sums / sizes, var, sizes, share, interval=False)[2]

    return group_by_heads(values.shape[0], p_against, alpha)


def compute_rank_tied_groups(average_ranks: np.ndarray, alpha: float = ALPHA) -> np.ndarray:
    """Tied groups of an average-rank board from (E, B) resampled average ranks
    (`rank_intervals.compute_resampled_average_ranks`), entries in board order."""
    ranks = np.round(np.asarray(average_ranks, dtype=float), 10)

    def p_against(head: int, others: np.ndarray) -> np.ndarray:
        diff = ranks[others] - ranks[head]
        tail = np.minimum((diff <= 0).mean(axis=1), (diff >= 0).mean(axis=1))
        return np.minimum(1.0, 2.0 * tail)

    return group_by_heads(ranks.shape[0], p_against, alpha)
