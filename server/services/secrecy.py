"""What a submission's owner may read of its runs: the phase's test-data secrecy and its hidden
scores, applied where results are served (API, pages, reports), never where they are stored.

A phase says how secret its test data is (`leaderboard.test_data`, kept in the phase's JSON):
- `public`: the owner reads everything their code wrote (logs, exception text, per-task results);
- `feedback`: scores and per-task results, but nothing participant code wrote while meta-testing
  (meta-test stdout/stderr, exception text and traceback from a test task): there the owner reads
  the stage, the exception's type (a built-in one's name only) and a fixed sentence;
- `secret`: as `feedback`, and no score, per-run, per-task or per-dataset result until the
  organizers publish the results (`publish_results`, audited).
Unset, a phase named `final` or one carried into (a final) is `secret`, any other `public`.
`leaderboard.hidden` (`scores` or `board`) hides the owner's own scores too, until published.
Organizers of the competition (services/tenancy.py) always read everything; the worker keeps
storing everything for them.

Meta-train output stays visible (meta-train sees only training data). The worker sends it apart
from the whole log (the finish body's `meta_train_log`, `runs.meta_train_log`, issue 35.3), cut
at its own count of what meta-train wrote; the log's text is never parsed to find the stages.
A run without that field (an older worker, or one that could not tell the stages apart) has its
log withheld whole: the rule fails closed.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import ConflictError
from server.models import TERMINAL_STATES, AuditLog, Phase, Run, Submission, User
from server.schemas.submission import coarse_progress
from server.services.runs import RETRY_NOTE, WAITING_FOR_HOST_LOCK
from server.services.tenancy import organizes_phase
from submission_api.contract.reasons import (
    BETWEEN_TASKS,
    META_TRAIN_STAGES,
    STAGE_REASONS,
    FailureReason,
)

TEST_DATA_LEVELS = ("public", "feedback", "secret")
HIDDEN_TEXT = ("The test data of this phase are secret: what the submission wrote or raised "
               "while meta-testing is shown to the organizers only. Reproduce the failure "
               "locally with `arena run` on the sample data.")
HIDDEN_LOG = ("==> meta-test output <==\n(hidden: the test data of this phase are secret; the "
              "organizers see it)\n")
# Which failure messages pass: those the platform wrote itself (below), and those written
# before any test task existed: the worker's verdict says where a run failed (the finish body's
# `stage`, stored as `runs.failure_stage`, issue 35.3), and only a meta-train stage reported
# under its own reason passes. A run without a stage (an older worker finished it) is redacted:
# its message's words are never read back as a stage.
TRUSTED_REASONS = (
    FailureReason.TIME_LIMIT,  # the worker's own fixed text (a wall time)
    FailureReason.INTERNAL_ERROR,  # the server's own text (services/runs.py)
)


@dataclass(frozen=True)
class OwnerView:
    """What the owner (not an organizer) of a submission reads in one phase."""

    meta_test_text: bool  # meta-test logs and exception text
    scores: bool  # the submission's and its runs' scores
    details: bool  # per-run summaries, per-task and per-dataset results, reports


FULL = OwnerView(meta_test_text=True, scores=True, details=True)


TestDataLevel = Literal["public", "feedback", "secret"]
ResultsState = Literal["shown", "withheld", "published"]


def test_data_level(phase: Phase) -> TestDataLevel:
    """`public`, `feedback` or `secret` (see the module docstring for the default)."""
    level = (phase.leaderboard or {}).get("test_data")
    if level in TEST_DATA_LEVELS:
        return cast(TestDataLevel, level)
    return "secret" if phase.name == "final" or phase.carry_from_id is not None else "public"


def published_at(phase: Phase) -> str | None:
    return (phase.leaderboard or {}).get("published_at")


def results_state(phase: Phase) -> ResultsState:
    """In words, for pages: whether the owners' scores are shown, withheld or published."""
    if published_at(phase):
        return "published"
    return "withheld" if not owner_view(phase).scores else "shown"


def owner_view(phase: Phase) -> OwnerView:
    level = test_data_level(phase)
    hidden = (phase.leaderboard or {}).get("hidden", "none") != "none"
    withheld = (level == "secret" or hidden) and not published_at(phase)
    return OwnerView(meta_test_text=level == "public", scores=not withheld,
                     details=not withheld)


def board_hidden(phase: Phase) -> str:
    """What the board hides from participants: its setting until published (nothing after),
    and at least the scores of a secret phase until then."""
    if published_at(phase):
        return "none"
    hidden = (phase.leaderboard or {}).get("hidden", "none")
    return "scores" if hidden == "none" and test_data_level(phase) == "secret" else hidden


def view_for(session: Session, phase: Phase, user: User | None) -> OwnerView:
    """FULL for the phase's organizers; the owner's view otherwise."""
    return FULL if organizes_phase(session, user, phase) else owner_view(phase)


def redact_message(reason: str | None, message: str | None,
                   stage: str | None = None) -> str | None:
    """A run's failure message as the owner of a secret-data run may read it; `stage` is where
    the run failed (`runs.failure_stage`): None (an older worker's run) withholds the text."""
    if not message:
        return message
    if reason is None and message.startswith(RETRY_NOTE):  # queued again: the platform's own
        return f"{RETRY_NOTE}."
    if reason is None and message == WAITING_FOR_HOST_LOCK:  # queued: the platform's own words
        return message
    if reason == FailureReason.PLATFORM_ERROR:
        return "The platform failed running this run; it is not charged to your quota."
    if reason in TRUSTED_REASONS or _from_meta_train(reason, stage):
        return message
    kind = _builtin_exception(message)
    what = f", {kind}" if kind else ""
    return (f"The run failed during meta-testing ({reason or 'failed'}{what}; stage: "
            f"{_stage_words(reason, stage)}). {HIDDEN_TEXT}")


def _from_meta_train(reason: str | None, stage: str | None) -> bool:
    return stage in META_TRAIN_STAGES and STAGE_REASONS[stage] == reason


def _stage_words(reason: str | None, stage: str | None) -> str:
    """The test-task stage a redacted failure happened in: the reported one, else those its
    reason stands for (`STAGE_REASONS`), else meta-test as a whole."""
    if stage is not None and stage != BETWEEN_TASKS:
        return stage
    stages = [s for s, r in STAGE_REASONS.items() if r == reason and s not in META_TRAIN_STAGES]
    return " or ".join(stages) or "meta-test"


def _builtin_exception(message: str) -> str | None:
    """The exception type on the traceback's last line, when it is a built-in exception (a
    class the submission defines could carry any name, hence any bytes)."""
    lines = [line for line in message.strip().splitlines() if line.strip()]
    name = lines[-1].split(":", 1)[0].strip() if lines else ""
    value = getattr(builtins, name, None) if name.isidentifier() else None
    return name if isinstance(value, type) and issubclass(value, BaseException) else None


def served_log(run: Run, view: OwnerView) -> str:
    """The run's log as `view` reads it: whole with the meta-test text, else what meta-train
    alone wrote (the worker's own field, never a cut of the log's text) and a notice in place
    of meta-test's part; the notice alone for a run without that field (fail closed)."""
    if view.meta_test_text:
        return run.log or ""
    if run.meta_train_log is None:
        return HIDDEN_LOG
    return f"{run.meta_train_log}\n{HIDDEN_LOG}"


def redact_run(run: dict[str, Any], view: OwnerView) -> dict[str, Any]:
    """A run's served fields (RunOut / RunResultOut as a dict) for `view`."""
    if not view.meta_test_text:
        run["message"] = redact_message(run.get("reason"), run.get("message"),
                                        run.get("failure_stage"))
        run["progress"] = coarse_progress(run.get("progress"))  # issue 34.5
    if not view.scores:
        run["score"] = None
    if not view.details:
        run["summary"], run["tasks"] = None, []
    return run


def pending_runs(session: Session, phase: Phase) -> dict[str, Any]:
    """The current runs of `phase`'s entries in good standing that have not ended: counts by
    state and their submissions' ids (a disqualified entry's runs do not count: it is off the
    board whatever they do)."""
    rows = session.execute(select(Run.state, Run.submission_id).join(
        Submission, Submission.id == Run.submission_id).where(
        Submission.phase_id == phase.id, Submission.disqualified_at.is_(None),
        Run.superseded_at.is_(None), Run.state.not_in(TERMINAL_STATES))).all()
    queued = sum(1 for r in rows if r.state == "queued")
    return {"pending_runs": len(rows), "queued": queued, "running": len(rows) - queued,
            "submission_ids": sorted({r.submission_id for r in rows})}


def check_no_runs_pending(session: Session, phase: Phase) -> None:
    """ConflictError (`phase.runs_pending`, with the counts) while runs of the phase's entries
    are waiting or running: published now, its board would rank entries without their final
    scores, and the publication cannot be undone. No override: a stuck run is cancelled (its
    entry then leaves the board), after which the phase publishes."""
    pending = pending_runs(session, phase)
    if pending["pending_runs"]:
        ids = pending["submission_ids"]
        shown = ", ".join(f"#{i}" for i in ids[:10]) + (" …" if len(ids) > 10 else "")
        raise ConflictError(
            f"phase {phase.id} still has {pending['pending_runs']} run(s) pending "
            f"({pending['queued']} queued, {pending['running']} running) of {len(ids)} "
            f"submission(s) ({shown}): publishing now would rank them without their scores. "
            "Wait for them to finish, or cancel the submissions you will not wait for, then "
            "publish", code="phase.runs_pending", **pending)


def publish_results(session: Session, phase: Phase, actor: User, now: datetime) -> Phase:
    """Reveal a closed phase's board and its owners' scores (audited). ConflictError while
    the phase is not closed (participants could still submit against what it reveals), while
    its runs are pending (`phase.runs_pending`), when published already, or when nothing of it
    is withheld (`phase.results_public`)."""
    if phase.closed_at is None and phase.status != "closed":
        raise ConflictError(f"phase {phase.id} is {phase.status!r}; close it first (POST "
                            f"/api/v1/phases/{phase.id}/close), then publish its results",
                            code="phase.not_closed")
    if published_at(phase):
        raise ConflictError(f"the results of phase {phase.id} were published at "
                            f"{published_at(phase)}", code="phase.already_published")
    if results_state(phase) == "shown":
        raise ConflictError(f"the results of phase {phase.id} are public already (its test "
                            "data are not secret and its board hides nothing): there is "
                            "nothing to publish", code="phase.results_public")
    check_no_runs_pending(session, phase)
    phase.leaderboard = {**(phase.leaderboard or {}), "published_at": now.isoformat()}
    session.add(AuditLog(actor_id=actor.id, action="phase.publish", target=f"phase:{phase.id}",
                         details={"test_data": test_data_level(phase)}, at=now))
    session.flush()
    return phase
