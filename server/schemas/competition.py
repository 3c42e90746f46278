"""Wire shapes for competitions, phases and datasets."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from server.bundles.onboarding import TabsSpec, TeamsSpec
from server.domain.phase import bounded_field

MAX_PHASES = 50
"""Phases of one competition (a bundle with 20,000 made /phases 18.5 MB, issue 21)."""


class DatasetRef(BaseModel):
    name: str
    content_hash: str = Field(pattern=r"^[0-9a-f]{16,64}$")


class PhaseData(BaseModel):
    """Which compiled datasets play which role in a phase."""

    collection: str = ""
    meta_train: list[DatasetRef] = []
    meta_valid: list[DatasetRef] = []
    meta_test: list[DatasetRef] = []

    def hashes(self) -> list[str]:
        refs = self.meta_train + self.meta_valid + self.meta_test
        return sorted({r.content_hash for r in refs})


class Resources(BaseModel):
    """What one run may use; the worker's sandbox enforces every bound (stored as JSON with the
    phase, so bounds added later read their defaults from older rows). Defaults and bounds are
    the run contract's (`submission_api.contract.resources`), the names `RunResources`'."""

    cpus: float = bounded_field("cpus")
    memory_mb: int = bounded_field("memory_mb")
    gpus: int = bounded_field("gpus")
    pids: int = bounded_field("pids")
    shm_mb: int = bounded_field("shm_mb")
    tmp_mb: int = bounded_field("tmp_mb")
    output_mb: int = bounded_field("output_mb")


class LeaderboardSettings(BaseModel):
    """How a phase's leaderboard ranks, which columns it shows and what it hides from
    participants during the phase (organizers always see everything)."""

    ranking: Literal["score", "average_rank"] = "score"
    columns: list[Literal["score", "ci95", "per_dataset", "average_rank", "submitted_at"]] = [
        "score", "ci95", "per_dataset"]
    hidden: Literal["none", "scores", "board"] = "none"
    statistics: Literal["during", "after_close", "never"] = Field(
        default="never", description="when the board shows rank intervals and tied groups: "
        "during the phase, only after it closes, or never (services.leaderboard_stats)")
    test_data: Literal["public", "feedback", "secret"] | None = Field(
        default=None, description="how secret the test data is (services/secrecy.py): public "
        "(owners read all their code wrote), feedback (no meta-test logs or exception text), "
        "secret (also no score or per-task result before the organizers publish); unset: "
        "secret for a phase named final or carried into, else public")


class PhaseFields(BaseModel):
    description: str = ""
    status: Literal["draft", "open", "closed"] = "draft"
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    protocol: dict[str, Any] = Field(default_factory=dict,
                                     description="ProtocolParams.to_dict() of the phase")
    data: PhaseData = Field(default_factory=PhaseData)
    seed: int = bounded_field("seed")
    runs_per_submission: int = bounded_field("runs_per_submission")
    time_limit_s: int = bounded_field("time_limit_s")
    resources: Resources = Field(default_factory=Resources)
    image: str | None = None
    queue: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")
    quota_per_day: int | None = bounded_field("quota_per_day", default=None)
    quota_total: int | None = bounded_field("quota_total", default=None)
    quota_in_flight: int | None = bounded_field("quota_in_flight", default=None)
    hide_logs: bool = False
    leaderboard_rule: Literal["best", "latest"] = "best"
    leaderboard: LeaderboardSettings = Field(default_factory=LeaderboardSettings)
    carry_from_id: int | None = Field(
        default=None, description="final phase: the phase whose chosen submissions it evaluates")


class PhaseCreate(PhaseFields):
    name: str = Field(min_length=1, max_length=100)


class PhaseUpdate(BaseModel):
    """Partial update: only the fields sent are changed."""

    model_config = ConfigDict(extra="forbid")
    name: str | None = None
    description: str | None = None
    status: Literal["draft", "open", "closed"] | None = None
    starts_at: datetime | None = None
    ends_at: datetime | None = None
    protocol: dict[str, Any] | None = None
    data: PhaseData | None = None
    seed: int | None = bounded_field("seed", default=None)
    runs_per_submission: int | None = bounded_field("runs_per_submission", default=None)
    time_limit_s: int | None = bounded_field("time_limit_s", default=None)
    resources: Resources | None = None
    image: str | None = None
    queue: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.-]+$")
    quota_per_day: int | None = bounded_field("quota_per_day", default=None)
    quota_total: int | None = bounded_field("quota_total", default=None)
    quota_in_flight: int | None = bounded_field("quota_in_flight", default=None)
    hide_logs: bool | None = None
    leaderboard_rule: Literal["best", "latest"] | None = None
    leaderboard: LeaderboardSettings | None = None
    carry_from_id: int | None = None

    @model_validator(mode="after")
    def _check_nulls(self) -> PhaseUpdate:
        check_no_null(self, NULLABLE_PHASE_FIELDS)
        return self


# Columns a phase may hold empty; an explicit null for any other field of an update would be
# stored and then break every read of the phase, so it is refused.
NULLABLE_PHASE_FIELDS = frozenset({"starts_at", "ends_at", "image", "queue", "quota_per_day",
                                   "quota_total", "quota_in_flight", "carry_from_id"})


def check_no_null(update: BaseModel, nullable: frozenset[str]) -> None:
    """Raise ValueError (a 422) when a partial update sends null for a required field."""
    nulls = sorted(k for k in update.model_fields_set
                   if getattr(update, k) is None and k not in nullable)
    if nulls:
        raise ValueError(f"{nulls} cannot be null; send a value or leave the field out")


class DatasetRefOut(BaseModel):
    name: str
    content_hash: str | None = Field(default=None, description="staff only")


class PhaseDataOut(BaseModel):
    """`PhaseData` as shown: content hashes to staff only (with public data they would pin the
    exact images the test tasks are cut from)."""

    collection: str = ""
    meta_train: list[DatasetRefOut] = []
    meta_valid: list[DatasetRefOut] = []
    meta_test: list[DatasetRefOut] = []


class PhaseOut(PhaseFields):
    """A phase as shown. To anyone but staff, `seed` is null, `protocol` lacks `split_seed` and
    `data` its content hashes (server/services/seeds.py says why)."""

    model_config = ConfigDict(from_attributes=True)
    # The response widens three of the input's fields (seed withheld, hashes cut, effective
    # status), on purpose and in place: pydantic keeps an overridden field where the base
    # put it, so the JSON keeps its order. Nothing passes a PhaseOut as PhaseFields.
    seed: int | None = Field(default=None, description="staff only")  # type: ignore[assignment]
    data: PhaseDataOut = Field(default_factory=PhaseDataOut)  # type: ignore[assignment]
    id: int
    competition_id: int
    name: str
    closed_at: datetime | None = None
    status: Literal["draft", "upcoming", "open", "closed"] = Field(  # type: ignore[assignment]
        default="draft", description="effective status: an open phase whose end date has "
        "passed is 'closed', one whose start date is ahead is 'upcoming'")
    accepting_submissions: bool = Field(
        default=False, description="an upload now would pass the phase check (open, within "
        "its dates, not a final phase)")
    countdown_s: int | None = Field(
        default=None, description="seconds until an upcoming phase opens or an open one "
        "closes, by the server's clock; null when no such date is ahead")
    test_data: Literal["public", "feedback", "secret"] = Field(
        default="public", description="the effective test-data secrecy (services/secrecy.py)")
    results: Literal["shown", "withheld", "published"] = Field(
        default="shown", description="owners' scores: shown, withheld until the organizers "
        "publish them, or published")
    published_at: datetime | None = None


class QuotaLeft(BaseModel):
    left: int
    limit: int


class QuotaOut(BaseModel):
    """What the caller may still submit to a phase now (counted as the upload counts)."""

    phase_id: int
    accepting_submissions: bool
    per_day: QuotaLeft | None = None
    total: QuotaLeft | None = None
    in_flight: QuotaLeft | None = None
    resets_at: datetime | None = Field(default=None, description="when per_day starts afresh")
    resets_in_s: int | None = Field(default=None, description="seconds until then, by the "
                                    "server's clock")


class CompetitionCreate(BaseModel):
    slug: str = Field(min_length=2, max_length=64, pattern=r"^[a-z0-9][a-z0-9-]*$")
    title: str = Field(min_length=1, max_length=200)
    description: str = ""
    participation: Literal["open", "approval"] = "open"  # approval: organizers admit each one
    phases: list[PhaseCreate] = Field(default_factory=list, max_length=MAX_PHASES)
    # Issue 23 (as in a bundle: server/bundles/onboarding.py): terms, tabs, teams.
    terms: str = ""
    tabs: TabsSpec = Field(default_factory=TabsSpec)
    teams: TeamsSpec = Field(default_factory=TeamsSpec)


class CompetitionUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str | None = Field(default=None, min_length=1, max_length=200)
    description: str | None = None
    participation: Literal["open", "approval"] | None = None

    @model_validator(mode="after")
    def _check_nulls(self) -> CompetitionUpdate:
        check_no_null(self, frozenset())
        return self


class CompetitionOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    slug: str
    title: str
    description: str
    participation: Literal["open", "approval"] = "open"
    created_at: datetime
    pages: list[dict[str, Any]] = []
    leagues: list[dict[str, Any]] = []
    phases: list[PhaseOut]


class DatasetOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    content_hash: str
    name: str
    n_images: int
    n_classes: int
    size_bytes: int
    created_at: datetime


class DatasetFromPath(BaseModel):
    path: str = Field(description="a compiled cache entry folder on the server (admin only)")
