"""`ProtocolParams`: the evaluation protocol of a phase as a frozen, validated value object,
stored with the phase as JSON (`to_dict` / `from_dict`).

`None` fields take the protocol's default at construction, so a stored object always holds
concrete values and two phases with equal dicts evaluate identically. Defaults and why:
  - tasks_per_dataset 100 (cross-domain, fixed, within-domain, id-ood, fewstab): the NeurIPS'22
    kit's `test_tasks_per_dataset`; 600 for meta-dataset, the test episodes per dataset of
    Triantafillou et al. 2020.
  - fixed 5-way 5-shot 15-query: the usual miniImageNet-style benchmark shape; fits Meta-Album's
    40-image classes split 20 / 20 into support and query pools.
  - within-domain 5-way 5-shot 20-query: NeurIPS'21 5-way 5-shot tasks, with the NeurIPS'22
    20 queries per class (a 40-image class gives exactly 20 query images per run).
  - id-ood 5-way 1-shot 5-query: BaseGen tasks use only the held-out 20% of a class, 8 images of
    a 40-image class, which disjoint pools split 5 query / 3 support.
  - fewstab 5-way 1-shot 15-query (Zheng et al. 2024: 5-way 1- or 5-shot tasks, 15 queries
    per class); eligibility thresholds n_s = n_shots, n_q = n_queries, as the reference's
    `SpuriousTask(n_s=shots, n_q=15)` (an organizer may ask for more).
`metric` is what the phase ranks by: "score" (mean normalized accuracy), except id-ood
(Setlur et al. 2021: BaseGen and NovelGen are two results) — "NovelGen" by default, or "BaseGen"
or "BaseGen+NovelGen" (their average) — and fewstab (Zheng et al. 2024) — "wAcc-A" by default,
or "wAcc-gap" (wAcc-R − wAcc-A, lower better). `aggregation` is how R runs become one score
(`scoring.aggregate`): "per_dataset_min" (MetaDL, default) or "min_of_run_means".
`test_pools` is how meta-test tasks draw their images (`sampling.pools.TEST_POOLS`): "per_task"
(default; afresh from the whole class, as the NeurIPS'22 kit and Meta-Dataset, so the intervals
cover) or "per_run" (disjoint pools per run; fewstab's default, its counts use them).
`split_seed` fixes the within-domain class split and the id-ood held-out images; the phase sets
it (usually to its phase seed) so they are the same for every run and every view.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

PROTOCOLS = ("cross-domain", "fixed", "meta-dataset", "within-domain", "id-ood", "fewstab")
_SHAPED = {"fixed": (5, 5, 15), "within-domain": (5, 5, 20), "id-ood": (5, 1, 5),
           "fewstab": (5, 1, 15)}
"""(n_ways, n_shots, n_queries) defaults of the protocols with a fixed task shape (see above)."""
_TASKS = {"meta-dataset": 600}
DEFAULT_TASKS_PER_DATASET = 100
RANKING_METRICS = {"id-ood": ("NovelGen", "BaseGen", "BaseGen+NovelGen"),
                   "fewstab": ("wAcc-A", "wAcc-gap")}
"""Ranking metrics a protocol offers, default first; any other protocol ranks by "score"."""
AGGREGATIONS = ("per_dataset_min", "min_of_run_means")
"""Mirrors `scoring.aggregate.AGGREGATIONS` (checked equal by a test)."""
TEST_POOLS = ("per_task", "per_run")
"""Mirrors `sampling.pools.TEST_POOLS` (checked equal by a test)."""
FEWSTAB_SHOTS = (1, 5)
"""FewSTAB evaluates 1-shot and 5-shot tasks (Zheng et al. 2024)."""


class ProtocolParamsError(ValueError):
    """An organizer's protocol parameters are invalid."""


@dataclass(frozen=True)
class ProtocolParams:
    """How a phase evaluates; see the module docstring for defaults."""

    name: str = "cross-domain"
    tasks_per_dataset: int | None = None
    n_ways: int | None = None
    n_shots: int | None = None
    n_queries: int | None = None
    held_out_fraction: float = 0.2
    split_fractions: tuple[float, float, float] = (0.7, 0.15, 0.15)
    fewstab_n_s: int | None = None
    fewstab_n_q: int | None = None
    datasets: tuple[str, ...] | None = None  # test datasets; default the 'meta-test' split
    split_seed: int = 0
    metric: str | None = None
    aggregation: str = "per_dataset_min"
    test_pools: str | None = None

    def __post_init__(self) -> None:
        if self.name not in PROTOCOLS:
            raise ProtocolParamsError(
                f"Protocol {self.name!r} is unknown; expected one of {PROTOCOLS}."
            )
        self._fill("tasks_per_dataset", _TASKS.get(self.name, DEFAULT_TASKS_PER_DATASET))
        shape = _SHAPED.get(self.name)
        for key, default in zip(("n_ways", "n_shots", "n_queries"), shape or (None,) * 3,
                                strict=True):
            if shape is None and getattr(self, key) is not None:
                raise ProtocolParamsError(
                    f"Protocol {self.name!r} draws its own task shape but got {key}="
                    f"{getattr(self, key)}; remove {key}, or use protocol 'fixed'."
                )
            self._fill(key, default)
        self._fill("metric", RANKING_METRICS.get(self.name, ("score",))[0])
        self._fill("test_pools", "per_run" if self.name == "fewstab" else "per_task")
        if self.name == "fewstab":
            self._fill("fewstab_n_s", self.n_shots)
            self._fill("fewstab_n_q", self.n_queries)
        object.__setattr__(self, "split_fractions", tuple(float(f) for f in self.split_fractions))
        if self.datasets is not None:
            object.__setattr__(self, "datasets", tuple(self.datasets))
        check_protocol_params(self)

    def _fill(self, key: str, default: Any) -> None:
        if getattr(self, key) is None:
            object.__setattr__(self, key, default)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: tuples become lists."""
        out = asdict(self)
        out["split_fractions"] = list(self.split_fractions)
        out["datasets"] = None if self.datasets is None else list(self.datasets)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProtocolParams:
        """Build from a stored dict; unknown keys are an error (a typo would silently change
        the evaluation)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ProtocolParamsError(
                f"Protocol parameters {unknown} are unknown; expected keys among {sorted(known)}."
            )
        values = dict(data)
        for key in ("split_fractions", "datasets"):
            if isinstance(values.get(key), list):
                values[key] = tuple(values[key])
        return cls(**values)


def _require_int(params: ProtocolParams, key: str, least: int) -> None:
    value = getattr(params, key)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ProtocolParamsError(
            f"Protocol {params.name!r}: {key}={value!r}, expected an integer >= {least}."
        )


def check_protocol_params(params: ProtocolParams) -> None:
    """Raise ProtocolParamsError on any value a run could not use."""
    for key, least in (("tasks_per_dataset", 1), ("n_ways", 2), ("n_shots", 1),
                       ("n_queries", 1), ("fewstab_n_s", 1), ("fewstab_n_q", 1),
                       ("split_seed", 0)):
        _require_int(params, key, least)
    if not 0.0 < params.held_out_fraction < 1.0:
        raise ProtocolParamsError(
            f"held_out_fraction={params.held_out_fraction!r}, expected a number in (0, 1)."
        )
    fractions = params.split_fractions
    if len(fractions) != 3 or min(fractions[0], fractions[2]) <= 0 or fractions[1] < 0 or abs(
            sum(fractions) - 1.0) > 1e-6:
        raise ProtocolParamsError(
            f"split_fractions={params.split_fractions!r}, expected (train, valid, test) with "
            "train, test > 0, valid >= 0, summing to 1 (e.g. (0.7, 0.15, 0.15))."
        )
    metrics = RANKING_METRICS.get(params.name, ("score",))
    if params.metric not in metrics:
        raise ProtocolParamsError(
            f"Protocol {params.name!r}: metric={params.metric!r}, expected one of {metrics}."
        )
    if params.aggregation not in AGGREGATIONS:
        raise ProtocolParamsError(
            f"aggregation={params.aggregation!r}, expected one of {AGGREGATIONS} (per-dataset "
            "minimum over runs, as MetaDL ranked, or the minimum of the run means)."
        )
    if params.test_pools not in TEST_POOLS:
        raise ProtocolParamsError(
            f"test_pools={params.test_pools!r}, expected one of {TEST_POOLS} (per_task: each "
            "task draws afresh from the whole class; per_run: disjoint pools for the run)."
        )
    if params.name == "fewstab":
        if params.test_pools != "per_run":
            raise ProtocolParamsError(
                f"fewstab test_pools={params.test_pools!r}, expected 'per_run' (its attribute "
                "counts are taken in the run's disjoint pools); remove test_pools."
            )
        if params.n_shots not in FEWSTAB_SHOTS:
            raise ProtocolParamsError(
                f"fewstab n_shots={params.n_shots}, expected one of {FEWSTAB_SHOTS}."
            )
        if params.fewstab_n_s < params.n_shots or params.fewstab_n_q < params.n_queries:
            raise ProtocolParamsError(
                f"fewstab thresholds n_s={params.fewstab_n_s}, n_q={params.fewstab_n_q}, "
                f"expected n_s >= n_shots ({params.n_shots}) and n_q >= n_queries "
                f"({params.n_queries})."
            )
