"""Whether two entries really swap order between BaseGen and NovelGen (id-ood boards).

`aggregate.compute_order_flips` finds the pairs whose observed order differs between the two
results (Setlur et al. 2021's point: the better submission on BaseGen may be the worse on
NovelGen). An observed flip can be noise: two entries a few thousandths apart on one side swap
on half of all test seeds. So each flip carries, per side, the paired difference a − b of the
two entries over the tasks both have (`paired.compute_stratified_difference`: each dataset
weighing as in that side's score, Welch–Satterthwaite degrees of freedom) — an interval of the
expected difference on that side's datasets over fresh test seeds.

A flip is *significant* when both differences are significant (p < `paired.ALPHA`) with
opposite signs: an intersection-union test, whose error rate is at most ALPHA without any
correction (Berger 1982), of the null "on at least one side the two do not differ".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from submission_api.scoring.paired import PairedDifference, compute_stratified_difference


@dataclass(frozen=True)
class FlipDifference:
    """a − b on BaseGen and on NovelGen, over the tasks both entries have on each side."""

    base: PairedDifference
    novel: PairedDifference

    @property
    def significant(self) -> bool:
        """Both sides significant, in opposite directions (module docstring)."""
        return (self.base.significant and self.novel.significant
                and self.base.mean * self.novel.mean < 0)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: each side's mean, 95% interval, p-value and task count."""
        def side(d: PairedDifference) -> dict[str, Any]:
            return {"mean": d.mean, "low": d.low, "high": d.high, "p_value": d.p_value, "n": d.n}

        return {"base": side(self.base), "novel": side(self.novel),
                "significant": self.significant}


def compute_flip_difference(base: tuple[np.ndarray, np.ndarray, np.ndarray],
                            novel: tuple[np.ndarray, np.ndarray, np.ndarray]
                            ) -> FlipDifference:
    """The flip statistics of one pair from each side's `(values_a, values_b, strata)`, three
    (n,) arrays over the tasks both entries have on that side (strata: each task's dataset).

    Raises:
        ValueError: a side has no shared task or mismatched shapes.
    """
    def side(a: np.ndarray, b: np.ndarray, strata: np.ndarray) -> PairedDifference:
        return compute_stratified_difference(np.asarray(a, float) - np.asarray(b, float),
                                             np.asarray(strata))

    return FlipDifference(side(*base), side(*novel))
