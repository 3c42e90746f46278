"""A phase's rules for its runs and its entrants, as one validated value object.

`PhaseRules` holds what a phase demands: its parsed protocol, the time limit and resources of
each run, how many runs a submission gets, the phase seed and the quotas. Every way a phase is
written reads its bounds from `PHASE_BOUNDS` here (the run limits among them from the run
contract, `submission_api.contract.resources`):
- the bundle (`server/bundles/schema.py` `PhaseSpec`, whose names — `time_limit`,
  `quotas.per_day`, `resources.memory` — it maps in `PhaseSpec.rules`),
- the JSON API (`server/schemas/competition.py`, whose names are the columns'),
- the table (`rules_of` reads a `Phase` row, `PhaseRules.to_columns` writes one: an int4 column
  never receives a value it cannot hold),
- the worker's claim (`server/api/internal.py` builds `ClaimedRun` from `rules_of`).

It lives in the server, not the run contract: quotas and seeds are the server's business; the
worker receives the run's part (protocol, time limit, resources) through the claim, whose
bounds the contract already owns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import Field

from submission_api.contract.resources import (
    DEFAULT_RESOURCES,
    DEFAULT_TIME_LIMIT_S,
    RESOURCE_BOUNDS,
    TIME_LIMIT_BOUND,
    Bound,
    RunResources,
)
from submission_api.protocols import ProtocolParams, ProtocolParamsError

QUOTA_MAX = 1_000_000
"""Submissions a quota may allow: any more is no quota (leave it unset) or a typo."""
INT32 = 2**31
FIX = "fix the phase"

PHASE_BOUNDS: dict[str, Bound] = {
    "time_limit_s": TIME_LIMIT_BOUND,
    "runs_per_submission": Bound(1, 1, 20),  # runs of one submission; the final phase uses 3
    # as the protocol's split_seed: a seed is a label, and JSON clients read 2**31 exactly
    "seed": Bound(0, -INT32, INT32 - 1),
    "quota_per_day": Bound(0, 0, QUOTA_MAX),
    "quota_total": Bound(0, 0, QUOTA_MAX),
    "quota_in_flight": Bound(0, 0, QUOTA_MAX),
}
"""Bounds of a phase's numeric settings, keyed by their column (and API) name; resources are
`RESOURCE_BOUNDS`."""


class PhaseRulesError(ValueError):
    """A phase's settings out of bounds, or a protocol that does not parse."""


class InvalidProtocolError(PhaseRulesError):
    """A phase's protocol parameters do not parse."""


def bounded_field(name: str, default: Any = ..., **extra: Any) -> Any:
    """A pydantic field with the bounds of phase setting or resource `name`, so the bundle and
    the API refuse the same values with the same message. `default` None for an optional one;
    otherwise the bound's default."""
    bound = PHASE_BOUNDS.get(name) or RESOURCE_BOUNDS[name]
    limits: dict[str, Any] = {"gt" if bound.exclusive_least else "ge": bound.least,
                              "le": bound.most}
    if default is ...:
        default = int(bound.default) if bound.integer else bound.default
    if bound.integer:
        limits = {k: int(v) for k, v in limits.items()}
    return Field(default=default, **limits, **extra)


@dataclass(frozen=True)
class Quotas:
    """Submissions an entrant may make: per UTC day, in all, and waiting or running at once;
    None is no limit."""

    per_day: int | None = None
    total: int | None = None
    in_flight: int | None = None


def parse_protocol(data: Mapping[str, Any] | None) -> ProtocolParams:
    """The protocol a phase stores or is sent; an empty one is the default protocol.

    Raises:
        PhaseRulesError: unknown keys or values out of range (the protocol's own message).
    """
    try:
        return ProtocolParams.from_dict(dict(data or {}))
    except (ProtocolParamsError, TypeError, ValueError) as error:
        raise InvalidProtocolError(f"invalid protocol parameters {dict(data or {})!r}: "
                              f"{error}") from error


@dataclass(frozen=True)
class PhaseRules:
    """What a phase demands of its runs and entrants; validated on construction."""

    protocol: ProtocolParams = field(default_factory=ProtocolParams)
    time_limit_s: int = DEFAULT_TIME_LIMIT_S
    resources: RunResources = DEFAULT_RESOURCES
    runs_per_submission: int = 1
    seed: int = 0
    quotas: Quotas = field(default_factory=Quotas)

    def __post_init__(self) -> None:
        for name, value in self._numbers().items():
            if value is not None:
                try:
                    PHASE_BOUNDS[name].check(name, value, FIX)
                except ValueError as error:
                    raise PhaseRulesError(str(error)) from None

    def _numbers(self) -> dict[str, int | None]:
        return {"time_limit_s": self.time_limit_s,
                "runs_per_submission": self.runs_per_submission, "seed": self.seed,
                "quota_per_day": self.quotas.per_day, "quota_total": self.quotas.total,
                "quota_in_flight": self.quotas.in_flight}

    @classmethod
    def from_columns(cls, values: Mapping[str, Any]) -> PhaseRules:
        """The rules a mapping in column (and API) names gives; a name left out reads its
        default.

        Raises:
            PhaseRulesError: a value out of bounds or a protocol that does not parse.
        """
        try:
            resources = RunResources.from_mapping(values.get("resources"))
        except ValueError as error:
            raise PhaseRulesError(str(error)) from None
        defaults = cls()
        return cls(
            protocol=parse_protocol(values.get("protocol")), resources=resources,
            time_limit_s=values.get("time_limit_s", defaults.time_limit_s),
            runs_per_submission=values.get("runs_per_submission", defaults.runs_per_submission),
            seed=values.get("seed", defaults.seed),
            quotas=Quotas(values.get("quota_per_day"), values.get("quota_total"),
                          values.get("quota_in_flight")))

    def to_columns(self) -> dict[str, Any]:
        """The `phases` columns these rules fill (the protocol and resources as JSON)."""
        return {"protocol": self.protocol.to_dict(), "resources": self.resources.to_dict(),
                **self._numbers()}

    @property
    def scoring(self) -> tuple[str, str]:
        """(metric, aggregation) by which the phase ranks its submissions."""
        return self.protocol.ranking


COLUMNS = frozenset(PhaseRules().to_columns())
"""The `phases` columns `PhaseRules` owns."""


def rules_of(phase: Any) -> PhaseRules:
    """The rules of a stored `Phase` row (or anything with its column attributes).

    Raises:
        PhaseRulesError: a row written around the model (by hand, or by an older version).
    """
    return PhaseRules.from_columns({name: getattr(phase, name) for name in COLUMNS})


def merge_columns(phase: Any, changes: Mapping[str, Any]) -> dict[str, Any]:
    """The columns of `phase` after `changes` (column names; others ignored), validated as one
    `PhaseRules`: a partial update is checked against what it leaves in place.

    Raises:
        PhaseRulesError: the result out of bounds or its protocol unparsable.
    """
    current = {name: getattr(phase, name, None) for name in COLUMNS}
    current = {k: v for k, v in current.items() if v is not None or k.startswith("quota_")}
    merged = {**current, **{k: v for k, v in changes.items() if k in COLUMNS}}
    return PhaseRules.from_columns(merged).to_columns()
