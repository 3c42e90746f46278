"""The shape of a competition bundle (pydantic, unknown keys refused so typos surface).

Durations accept seconds or `5h`, `90m`, `1h30m`; memory accepts megabytes or `16G`, `512M`.
Dataset references are `{name, hash}` mappings or `name@hash` strings; plain names are allowed
only beside a local collection `path`, which `arena competition create` compiles and registers
before sending the bundle (the server resolves those names through what the CLI sends along).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from server.bundles.kit_spec import KitSpec
from server.bundles.onboarding import QuestionSpec, TabsSpec, TeamsSpec, check_unique_keys
from server.domain.phase import PhaseRules, Quotas, bounded_field, parse_protocol
from submission_api.contract.resources import RunResources

SLUG = r"^[a-z0-9][a-z0-9-]*$"
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_DURATION = re.compile(r"^(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?$")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*([MmGg])i?[Bb]?$")
COLUMNS = ("score", "ci95", "per_dataset", "average_rank", "submitted_at")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def parse_duration(value: Any) -> int:
    """Seconds from an int or a string like `5h`, `90m`, `1h30m`, `45s`."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _DURATION.match(str(value).strip()) if isinstance(value, str) else None
    if not match or not any(match.groups()):
        raise ValueError(f"got {value!r}; expected seconds or a duration like '5h', '90m'")
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def parse_memory_mb(value: Any) -> int:
    """Megabytes from an int or a string like `16G`, `512M`."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _MEMORY.match(str(value).strip()) if isinstance(value, str) else None
    if not match:
        raise ValueError(f"got {value!r}; expected megabytes or a size like '16G', '512M'")
    number, unit = float(match.group(1)), match.group(2).upper()
    return int(number * 1024) if unit == "G" else int(number)


class Page(_Strict):
    title: str = Field(min_length=1, max_length=200)
    content: str = ""


class LeagueSpec(_Strict):
    name: str = Field(pattern=NAME, max_length=64)
    title: str = ""
    description: str = ""
    final_threshold: float | None = Field(
        default=None, description="a submission must score above this to enter the final")


class DataRef(_Strict):
    name: str = Field(min_length=1, max_length=200)
    hash: str | None = Field(default=None, pattern=r"^[0-9a-f]{16,64}$")

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, value: Any) -> Any:
        if isinstance(value, str):
            name, _, digest = value.partition("@")
            return {"name": name, "hash": digest or None}
        return value


class DataSpec(_Strict):
    collection: str = ""
    path: str | None = Field(default=None, description="a local collection folder (CLI only)")
    meta_train: list[DataRef] | None = None
    meta_valid: list[DataRef] | None = None
    meta_test: list[DataRef] | None = None


class ResourcesSpec(_Strict):
    """What one run of the phase may use; the sandbox enforces each bound (SandboxLimits)."""

    gpus: int = bounded_field("gpus")
    cpus: float = bounded_field("cpus")
    memory: int = bounded_field("memory_mb", description="megabytes, or '16G'")
    pids: int = bounded_field("pids", description="processes and threads at once (a fork "
                               "bomb stops here)")
    shm: int = bounded_field("shm_mb", description="/dev/shm: MB, or '1G'")
    tmp: int = bounded_field("tmp_mb", description="/tmp tmpfs: MB, or '1G'")
    output: int = bounded_field("output_mb",
                                 description="the run's writable output folder: MB, or '1G'")

    _memory = field_validator("memory", "shm", "tmp", "output", mode="before")(classmethod(
        lambda cls, v: parse_memory_mb(v)))


class QuotaSpec(_Strict):
    per_day: int | None = bounded_field("quota_per_day", default=None)
    total: int | None = bounded_field("quota_total", default=None)
    in_flight: int | None = bounded_field("quota_in_flight", default=None)


class LeaderboardSpec(_Strict):
    ranking: Literal["score", "average_rank"] = "score"
    rule: Literal["best", "latest"] = "best"
    columns: list[Literal[COLUMNS]] = ["score", "ci95", "per_dataset"]  # type: ignore[valid-type]
    hidden: Literal["none", "scores", "board"] = "none"
    # When rank intervals and tied groups show (services.leaderboard_stats).
    statistics: Literal["during", "after_close", "never"] = "never"
    # services/secrecy.py; unset: secret for a phase named final or carried into, else public.
    test_data: Literal["public", "feedback", "secret"] | None = None


class PhaseSpec(_Strict):
    name: str = Field(pattern=NAME, max_length=100)
    description: str = ""
    # None: a new phase opens; an existing phase keeps its status (closing and reopening are
    # the phase's own actions, so re-applying a bundle never reopens a closed phase).
    status: Literal["draft", "open", "closed"] | None = None
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    data: DataSpec = Field(default_factory=DataSpec)
    protocol: dict[str, Any] = Field(default_factory=lambda: {"name": "cross-domain"})
    seed: int = bounded_field("seed")
    runs_per_submission: int = bounded_field("runs_per_submission")
    time_limit: int = bounded_field("time_limit_s", description="seconds, or '5h'")
    resources: ResourcesSpec = Field(default_factory=ResourcesSpec)
    image: str | None = None
    queue: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")
    quotas: QuotaSpec = Field(default_factory=QuotaSpec)
    leaderboard: LeaderboardSpec = Field(default_factory=LeaderboardSpec)
    hide_logs: bool = False
    carry_from: str | None = Field(default=None, description="the phase whose chosen "
                                   "submissions this (final) phase evaluates")
    factsheet: list[QuestionSpec] = []  # questions its entrants answer (server/bundles/onboarding)

    _time = field_validator("time_limit", mode="before")(classmethod(
        lambda cls, v: parse_duration(v)))
    _keys = field_validator("factsheet")(classmethod(lambda cls, v: check_unique_keys(v)))

    @field_validator("starts_at", "ends_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError(f"got {value.isoformat()} without a time zone; write it in UTC "
                             "like 2022-07-01T00:00:00Z")
        return value

    @field_validator("protocol")
    @classmethod
    def _protocol(cls, value: dict[str, Any]) -> dict[str, Any]:
        return parse_protocol(value).to_dict()

    def rules(self) -> PhaseRules:
        """The phase's rules (server/domain/phase.py): the one place the bundle's names
        (`time_limit`, `quotas.per_day`, `resources.memory`, ...) map onto the model's."""
        res = self.resources
        return PhaseRules(
            protocol=parse_protocol(self.protocol), time_limit_s=self.time_limit,
            resources=RunResources(cpus=res.cpus, memory_mb=res.memory, gpus=res.gpus,
                                   pids=res.pids, shm_mb=res.shm, tmp_mb=res.tmp,
                                   output_mb=res.output),
            runs_per_submission=self.runs_per_submission, seed=self.seed,
            quotas=Quotas(self.quotas.per_day, self.quotas.total, self.quotas.in_flight))

    @model_validator(mode="after")
    def _dates(self) -> PhaseSpec:
        if self.starts_at and self.ends_at and self.ends_at <= self.starts_at:
            raise ValueError(f"ends_at {self.ends_at.isoformat()} is not after starts_at "
                             f"{self.starts_at.isoformat()}; fix one of the dates")
        return self


class BundleSpec(_Strict):
    slug: str = Field(min_length=2, max_length=64, pattern=SLUG)
    title: str = Field(min_length=1, max_length=200)
    description: str = ""
    participation: Literal["open", "approval"] = "open"  # approval: organizers admit each one
    pages: list[Page] = []
    terms: str = ""  # Markdown participants accept before submitting
    tabs: TabsSpec = Field(default_factory=TabsSpec)
    teams: TeamsSpec = Field(default_factory=TeamsSpec)
    leagues: list[LeagueSpec] = []
    kit: KitSpec = Field(default_factory=KitSpec)  # uploaded by the CLI (bundles/kit_spec.py)
    phases: list[PhaseSpec] = Field(min_length=1, max_length=50)  # schemas.competition.MAX_PHASES

    @model_validator(mode="after")
    def _names(self) -> BundleSpec:
        for what, names in (("phase", [p.name for p in self.phases]),
                            ("league", [lg.name for lg in self.leagues])):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{what} names {dupes} appear more than once; make them unique")
        return self
