"""Wire shapes for submissions, runs, results and the leaderboard."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

COARSE_PROGRESS_KEYS = ("step",)


def coarse_progress(progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the owner of a run in a phase with secret test data sees while it runs (issue 34.5):
    its step (meta_fit or meta_test) only. The count of test tasks done and the heartbeat's
    time would give each test task's duration, beyond the run's wall time that
    docs/internals.md budgets; organizers see the whole report."""
    if not progress:
        return None
    return {k: progress[k] for k in COARSE_PROGRESS_KEYS if k in progress}


class RunOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    index: int
    seed: int
    state: str
    reason: str | None
    message: str | None
    failure_stage: str | None = Field(
        default=None, description="where a failed run failed, as its worker placed it: a "
        "participant stage (config, import, meta_fit, save, load, fit, predict, receive) or "
        "meta_test; null for older runs")
    score: float | None
    attempts: int
    started_at: datetime | None
    finished_at: datetime | None
    cancel_requested_at: datetime | None = None
    superseded_at: datetime | None = Field(
        default=None, description="set when a re-run replaced this run (kept as history)")
    progress: dict[str, Any] | None = Field(
        default=None, description="while it runs: step (meta_fit, meta_test), tasks_done, "
        "tasks_total, at — as its worker last reported (the log tail is not here: logs follow "
        "the phase's hide_logs rule, on the logs endpoint and the page)")

    @field_validator("progress")
    @classmethod
    def _without_log(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else {k: v for k, v in value.items() if k != "log_tail"}


class SubmissionOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    id: int
    phase_id: int
    user_id: int
    sha256: str
    size_bytes: int
    note: str
    state: str
    reason: str | None
    message: str | None
    score: float | None
    created_at: datetime
    finished_at: datetime | None
    queue_position: int | None = None
    league: str | None = None
    is_selected: bool = False
    is_baseline: bool = False
    carried_from_id: int | None = None
    disqualified_at: datetime | None = None
    disqualified_reason: str | None = None
    team_id: int | None = None
    method_name: str = ""
    method_description: str = ""
    code_url: str | None = None
    runs: list[RunOut]


class TaskResultOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)
    task_id: int
    dataset: str
    group: str
    n_ways: int
    n_shots: int
    score: float
    accuracy: float | None


class RunResultOut(RunOut):
    summary: dict[str, Any] | None
    tasks: list[TaskResultOut]


class SubmissionResults(BaseModel):
    submission_id: int
    state: str
    score: float | None
    runs: list[RunResultOut]


class RunLog(BaseModel):
    run_id: int
    index: int
    state: str
    log: str


class SubmissionLogs(BaseModel):
    submission_id: int
    runs: list[RunLog]


class LeaderboardEntry(BaseModel):
    """One row; `rank`/`score`/`ci95`/`per_dataset`/`average_rank` are null when the phase
    hides scores from participants."""

    rank: int | None
    username: str
    submission_id: int
    score: float | None
    created_at: datetime
    league: str | None = None
    ci95: float | None = None
    ci95_low: float | None = Field(default=None, description="the bounded 95% interval of the "
                                   "ranked value [ci95_low, ci95_high], inside the score's "
                                   "bounds; `ci95` is the symmetric t half-width")
    ci95_high: float | None = None
    per_dataset: dict[str, float] | None = None
    average_rank: float | None = None
    is_baseline: bool = False
    is_selected: bool = False
    sides: dict[str, float] | None = Field(
        default=None, description="two-sided protocols: BaseGen and NovelGen (id-ood), wAcc-A, "
        "wAcc-R and wAcc-gap (fewstab), each aggregated over runs like the score")
    flips: list[int] | None = Field(
        default=None, description="id-ood: submission ids whose order against this one differs "
        "between BaseGen and NovelGen")
    flip_stats: list[dict[str, Any]] | None = Field(
        default=None, description="id-ood: per flip, {other, base, novel, significant}: the "
        "paired difference this − other on BaseGen and on NovelGen (mean, 95% interval low/high, "
        "p_value, n tasks) over the tasks both have; significant when both sides are, in "
        "opposite directions")
    rank_low: int | None = Field(
        default=None, description="95% rank interval over bootstrap resamples (when the phase "
        "shows statistics)")
    rank_high: int | None = None
    tied_group: int | None = Field(
        default=None, description="entries of one group do not differ significantly from the "
        "entry above (paired t-test over tasks, Holm-corrected along the board)")


class Leaderboard(BaseModel):
    phase_id: int
    rule: str
    ranking: str = "score"
    columns: list[str] = []
    hidden: str = Field(default="none", description="none | scores | board (for participants)")
    league: str | None = None
    leagues: list[str] = []
    datasets: list[str] = Field(default=[], description="datasets of the entries returned")
    total: int = Field(default=0, description="entries on the whole board (all pages)")
    offset: int = 0
    limit: int | None = Field(default=None, description="null: the whole board")
    statistics: bool = Field(default=False, description="rank intervals and tied groups shown")
    entries: list[LeaderboardEntry]


class Comparison(BaseModel):
    """Submission a against b on the tasks both have (issues 15, 22): the difference a − b of
    the phase's ranked quantity (`metric`), its stratified t 95% interval over tasks and test
    (an interval of the expected difference on these datasets over fresh test seeds), and a
    95% bootstrap interval resampling datasets only when there are enough datasets for one
    (else null, and `dataset_note` says why)."""

    a: int
    b: int
    n_tasks: int
    n_datasets: int
    mean: float
    t_low: float
    t_high: float
    p_value: float
    significant: bool
    bootstrap_low: float | None = None
    bootstrap_high: float | None = None
    metric: str = "score"
    dataset_note: str | None = None
    wilcoxon_p: float = Field(description="signed-rank test over tasks (normal approximation)")
