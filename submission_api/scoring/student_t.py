"""Student-t tail probabilities and quantiles in numpy alone, for `scoring.paired`.

submission_api stays importable without SciPy in the participant kit, so the two-sided p-value
of a t statistic is computed from the regularized incomplete beta function,
`P(|T| > t) = I_{df/(df+t^2)}(df/2, 1/2)`, evaluated by its continued fraction (modified
Lentz; Press et al., Numerical Recipes, 3rd ed., §6.4), vectorized over arrays. Quantiles
invert it by Newton's method (`compute_t_quantile`). Tests compare both with scipy.stats.t to
1e-9.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

_TINY = 1e-300
_EPS = 1e-15
_MAX_TERMS = 2_000
"""Terms of the continued fraction: it needs O(sqrt(max(a, b))) (Numerical Recipes §6.4), so
2,000 covers df up to ~10^6 tasks; the loop stops as soon as every value has converged."""
_lgamma = np.frompyfunc(math.lgamma, 1, 1)
_NEWTON_STEPS = 12
"""Newton steps at most; from Cornish–Fisher's start, 3-4 reach 1e-12 for df >= 3."""


def _betacf(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Continued fraction of I_x(a, b); each element stops on its own once converged (one
    straggler must not keep a whole board's p-values iterating)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 - qab * x / qap
    d = np.where(np.abs(d) < _TINY, _TINY, d)
    d = 1.0 / d
    h = d.copy()
    live = np.arange(x.size)
    for m in range(1, _MAX_TERMS + 1):
        m2 = 2 * m
        al, bl, xl = a[live], b[live], x[live]
        cl, dl, hl = c[live], d[live], h[live]
        for aa in (m * (bl - m) * xl / ((qam[live] + m2) * (al + m2)),
                   -(al + m) * (qab[live] + m) * xl / ((al + m2) * (qap[live] + m2))):
            dl = 1.0 + aa * dl
            dl = np.where(np.abs(dl) < _TINY, _TINY, dl)
            cl = 1.0 + aa / cl
            cl = np.where(np.abs(cl) < _TINY, _TINY, cl)
            dl = 1.0 / dl
            delta = dl * cl
            hl = hl * delta
        c[live], d[live], h[live] = cl, dl, hl
        live = live[np.abs(delta - 1.0) >= _EPS]
        if not live.size:
            break
    return h


def compute_betainc(a: np.ndarray, b: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Regularized incomplete beta I_x(a, b), elementwise (a, b > 0; 0 <= x <= 1)."""
    a, b, x = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, b, x)))
    out = np.where(x <= 0.0, 0.0, 1.0)
    inside = (x > 0.0) & (x < 1.0)
    if not inside.any():
        return out
    a_, b_, x_ = a[inside], b[inside], x[inside]
    log_front = (np.asarray(_lgamma(a_ + b_) - _lgamma(a_) - _lgamma(b_), dtype=float)
                 + a_ * np.log(x_) + b_ * np.log1p(-x_))
    front = np.exp(log_front)
    direct = x_ < (a_ + 1.0) / (a_ + b_ + 2.0)
    # The fraction converges fast only on one side of the mean; use the symmetry on the other.
    value = np.where(direct, 0.0, 1.0)
    if direct.any():
        value[direct] = front[direct] * _betacf(a_[direct], b_[direct], x_[direct]) / a_[direct]
    flip = ~direct
    if flip.any():
        value[flip] = 1.0 - front[flip] * _betacf(b_[flip], a_[flip], 1.0 - x_[flip]) / b_[flip]
    out[inside] = value
    return out


def compute_t_two_sided_p(t: np.ndarray | float, df: np.ndarray | float) -> np.ndarray:
    """P(|T| >= |t|) for Student's T with `df` degrees of freedom (df > 0), elementwise."""
    t, df = np.broadcast_arrays(np.asarray(t, dtype=float), np.asarray(df, dtype=float))
    with np.errstate(over="ignore", invalid="ignore"):
        x = df / (df + t * t)
    x = np.where(np.isinf(t), 0.0, x)
    return np.clip(compute_betainc(df / 2.0, np.full_like(df, 0.5), x), 0.0, 1.0)


def _t_density(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    log_norm = (np.asarray(_lgamma((df + 1.0) / 2.0) - _lgamma(df / 2.0), dtype=float)
                - 0.5 * np.log(df * math.pi))
    return np.exp(log_norm - (df + 1.0) / 2.0 * np.log1p(t * t / df))


def compute_t_quantile(level: float, df: np.ndarray | float) -> np.ndarray:
    """The two-sided critical value c with P(|T| <= c) = `level` (0.95 -> t_{0.975, df}).

    Cornish–Fisher's expansion in 1/df (Abramowitz & Stegun 26.7.5) starts Newton's method on
    the two-sided tail, which is convex for c > 0, so a few steps reach 1e-12; df = 1 and 2
    have closed forms. The one Student-t quantile of the package (`intervals` uses it too).
    """
    df = np.asarray(df, dtype=float)
    alpha = 1.0 - level
    z = NormalDist().inv_cdf(1.0 - alpha / 2.0)
    g1 = (z ** 3 + z) / 4.0
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96.0
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384.0
    g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160.0
    with np.errstate(divide="ignore", over="ignore"):
        c = z + g1 / df + g2 / df ** 2 + g3 / df ** 3 + g4 / df ** 4
    c = np.where(df < 3.0, np.tan(math.pi * level / 2.0) * (df <= 1.0)
                 + (1.0 - alpha) * np.sqrt(2.0 / np.maximum(1.0 - (1.0 - alpha) ** 2, _TINY))
                 * (df > 1.0), c)
    for _ in range(_NEWTON_STEPS):
        step = (compute_t_two_sided_p(c, df) - alpha) / (2.0 * _t_density(c, df))
        c = np.maximum(c + step, z)  # the normal quantile bounds every t quantile from below
        if np.all(np.abs(step) <= 1e-12 * c):
            break
    return c
