"""`decide_verdict`: the one place a run's verdict is decided from its fixed result record, for
the worker (`worker.pipeline.score`) and `arena run` (`submission_api.runner.local`) alike.

Order matters, as in DOMjudge's runguard: a limit the run hit explains any exit status, so
limits come first (time, then memory, then output size); then what the trusted task server saw
of meta-test; then a non-zero exit is attributed to the stage the participant side reported.
Only a clean exit is scored, and the scorer's own failures come back through `from_failure`.

Kills are told apart by evidence. SIGKILL is out of memory only when the record says so (the
engine's OOM flag or event, the cgroup's `memory.events`). The supervisor of meta-test runs no
participant code and is out of reach of the tasks' processes (another uid, other namespaces), so
its SIGKILL without such evidence came from outside the run: a platform fault, retried and never
charged. The same holds for a test task's process (issue 21): it cannot be told apart from the
task killing itself, so a participant doing that gets an uncharged retry; the worker's bound on
platform faults per run still stops it. A SIGKILL of meta-train (where participant code runs in
the process) stays the participant's: it can always be their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from submission_api.contract.caps import MESSAGE_CAP, cap_error, cap_tail, cap_trace
from submission_api.contract.reasons import (
    BETWEEN_TASKS,
    LAST_STAGE,
    META_TRAIN_STAGES,
    STAGE_REASONS,
    FailureReason,
)
from submission_api.contract.record import SIGKILL, MetaTestEnd, ResultRecord
from submission_api.contract.states import RunState


class VerdictKind(StrEnum):
    SCORE = "score"
    """The participant side ended cleanly: score its predictions."""
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    PLATFORM = "platform"
    """Not the participant's doing: retry, never charge."""
    UNEXPLAINED = "unexplained"
    """A SIGKILL with no evidence of who sent it: the host may have, but so may the participant's
    own code (a process can kill itself or its supervisor's children). It ends the run at once,
    uncharged, never retried, and counts towards the participant's daily allowance of such
    ends (the server charges past it), so it cannot be turned into free runs at will."""


@dataclass(frozen=True)
class Verdict:
    """What became of a run. `reason` is None only for `SCORE`; `message` says what happened and
    how to fix it; `trace` is the participant's traceback, if any (tail kept)."""

    kind: VerdictKind
    reason: FailureReason | None = None
    message: str = ""
    trace: str | None = None
    stage: str | None = None
    """The meta-train stage the failure was raised in (`META_TRAIN_STAGES`), or the test task's
    stage; None where no participant stage explains it (meta-test as a whole)."""

    @property
    def state(self) -> RunState | None:
        """The run's final state; None for `SCORE` (decided by scoring) and `PLATFORM`
        (the run goes back to the queue)."""
        return {VerdictKind.FAILED: RunState.FAILED,
                VerdictKind.TIMED_OUT: RunState.TIMED_OUT}.get(self.kind)

    @property
    def charged(self) -> bool:
        return self.kind in (VerdictKind.FAILED, VerdictKind.TIMED_OUT)

    def full_message(self) -> str:
        """The message and the traceback as stored (`compose_message`)."""
        return compose_message(self.message, self.trace)


def compose_message(message: str, trace: str | None) -> str:
    """A run's message with the traceback after a blank line (as the submission page parses it,
    `server/web/failure.py`), both cut to fit `MESSAGE_CAP`: the message keeps its head, the
    traceback its tail."""
    message = message[: MESSAGE_CAP // 4]
    if trace:
        room = MESSAGE_CAP - len(message) - 2
        message = f"{message}\n\n{cap_tail(trace, room)}"
    return message


SCORE = Verdict(VerdictKind.SCORE)


def failed(reason: str, message: str, trace: str | None = None,
           stage: str | None = None) -> Verdict:
    """A charged failure with a stored reason (`FailureReason` values only)."""
    return Verdict(VerdictKind.FAILED, FailureReason(reason), message, cap_trace(trace), stage)


def platform(message: str) -> Verdict:
    return Verdict(VerdictKind.PLATFORM, FailureReason.PLATFORM_ERROR, message)


def unexplained_kill(message: str) -> Verdict:
    return Verdict(VerdictKind.UNEXPLAINED, FailureReason.PLATFORM_ERROR, message)


def decide_verdict(record: ResultRecord) -> Verdict:
    """The verdict on one executed run (before scoring); never raises."""
    limit = _limit_verdict(record)
    if limit is not None:
        return limit
    if record.meta_test is not None and record.meta_test.reason is not None:
        return _meta_test_verdict(record, record.meta_test)
    if record.exit_code == 0:
        return SCORE
    return _exit_verdict(record)


def _limit_verdict(record: ResultRecord) -> Verdict | None:
    if record.limit_hit == "backstop" and not record.timed_out:
        # Under its CPU time and its charged wall clock, yet past the plain wall clock's
        # backstop: the host's load kept it waiting (issue 38.3). Retried, never charged.
        stall = f", {record.stall_s:.0f} s of it waiting for a core" if record.stall_s else ""
        cpu = f", {record.cpu_time_s:.0f} s of CPU time" if record.cpu_time_s is not None else ""
        return platform(f"the worker's host was too loaded to run this submission: stopped at "
                        f"the wall-clock backstop after {record.wall_time_s:.0f} s{stall}{cpu}; "
                        "the run is retried and not charged.")
    if record.timed_out:
        limit = f" of {record.time_limit_s:g} s" if record.time_limit_s else ""
        if record.limit_hit == "cpu":
            used = f" ({record.cpu_time_s:.0f} s)" if record.cpu_time_s is not None else ""
            what = (f"its CPU time{used} passed its limit (the time limit{limit} times the "
                    "phase's CPUs)")
        elif record.limit_hit == "wall":
            waited = f", less {record.stall_s:.0f} s it waited for a core" if record.stall_s \
                else ""
            what = f"it ran past its time limit{limit} ({record.wall_time_s:.0f} s{waited})"
        else:
            what = f"the run exceeded its wall-clock limit{limit}"
        return Verdict(VerdictKind.TIMED_OUT, FailureReason.TIME_LIMIT,
                       f"{what} and was stopped after {record.wall_time_s:.0f} s; make "
                       "meta-training and meta-testing faster or check for a hang (see the log).")
    if record.oom_killed:
        limit = f" of {record.memory_limit_mb} MB" if record.memory_limit_mb else ""
        return failed(FailureReason.OUT_OF_MEMORY, f"the run was killed for exceeding its "
                      f"memory limit{limit}; use smaller batches or a smaller model.")
    if record.output_exceeded:
        return failed(FailureReason.BAD_PREDICTIONS, f"{record.output_detail}." if
                      record.output_detail else "the output folder exceeded its size limit; "
                      "write only predictions and a compact learner.")
    return None


def _meta_test_verdict(record: ResultRecord, end: MetaTestEnd) -> Verdict:
    """The trusted side's account of meta-test outranks whatever status.json says."""
    message = end.message or str(end.reason)
    if end.reason == FailureReason.PLATFORM_ERROR:
        # the trusted side's own failure, or the fork server / a task's reaper lost where the
        # task could not reach them (runner/forkserver.py): retried, never charged
        return platform(message)
    if end.reason == FailureReason.KILLED:
        return unexplained_kill(f"{message}, and no memory limit was hit (no out-of-memory kill "
                                "recorded); not charged unless it happens to several of your "
                                "runs a day.")
    if end.failed_task is None and record.signal == SIGKILL:
        return unexplained_kill("the meta-test supervisor (platform code, no participant code "
                                "runs in it) was killed by SIGKILL, with no out-of-memory kill "
                                f"recorded ({message}); not charged unless it happens to "
                                "several of your runs a day.")
    try:
        reason = FailureReason(str(end.reason))
    except ValueError:
        reason = FailureReason.CRASHED
    return failed(reason, message, end.traceback)


def _exit_verdict(record: ResultRecord) -> Verdict:
    status = record.status
    code = record.exit_code
    if status.problem is not None:
        return failed(FailureReason.BAD_PREDICTIONS, status.problem)
    how = (f"was killed by signal {record.signal}" if record.signal is not None
           else f"exited with code {code}")
    if status.stage == LAST_STAGE:
        # Meta-training ended cleanly; what ended is the meta-test side (the supervisor).
        if record.signal == SIGKILL:
            return unexplained_kill(f"the meta-test supervisor (platform code) {how}, with no "
                                    "out-of-memory kill recorded; not charged unless it happens "
                                    "to several of your runs a day.")
        done = (f" after {record.meta_test.tasks_done} of {record.meta_test.n_tasks} test tasks"
                if record.meta_test is not None else "")
        return failed(FailureReason.CRASHED, f"the meta-test side {how}{done}, after "
                      f"meta-training finished; {_log_hint(record)}")
    if status.stage in STAGE_REASONS:
        stage = str(status.stage)
        where = f" on test task {status.task}" if status.task is not None else ""
        if status.error:
            what = f"raised: {cap_error(status.error)}"
        else:
            what = (f"ended the process with exit code {code} without reporting an error (a "
                    f"crash, an explicit exit or a signal); {_log_hint(record)}")
        # a meta-train stage named with a test task is a forgery: it is meta-test's
        placed = None if status.task is not None and stage in META_TRAIN_STAGES else stage
        return failed(STAGE_REASONS[stage], f"{stage}{where} {what}", status.traceback, placed)
    if status.stage == BETWEEN_TASKS:
        return failed(FailureReason.PREDICT_ERROR, f"the process died during meta-testing with "
                      f"exit code {code}; see the log.", status.traceback)
    return failed(FailureReason.IMPORT_ERROR, f"the participant side exited with code {code} "
                  f"before reporting a stage (last: {status.stage!r}); check that model.py "
                  "imports with `arena run`, and see the log.", status.traceback)


def _log_hint(record: ResultRecord) -> str:
    if record.stderr_empty:
        return ("stderr is empty: the process ended without a Python error (an explicit "
                "os._exit, a signal or a crash in native code)")
    return "the log may hold its traceback"


def from_failure(reason: str, message: str, trace: str | None = None) -> Verdict:
    """The verdict of a participant failure found outside the record (the scorer's, or an
    unsafe zip); a platform reason stays a platform verdict."""
    if reason in (FailureReason.PLATFORM_ERROR, FailureReason.KILLED):
        return platform(message)
    return failed(reason, message, trace)
