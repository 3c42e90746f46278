"""Score step: turn what the participant side did (an `ExecutionResult` and its `output/`) into
the run's final state, failure reason, message and log.

The verdict itself is `submission_api.contract.verdict.decide_verdict`'s, over the fixed record
`build_record` assembles (the same function decides for `arena run`); only a clean exit is
scored, by the runner's own `score_output`, against the kept answers. Everything read from
`output/` is untrusted; the runner's scorer reads it with that in mind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from submission_api.contract.caps import cap_tail
from submission_api.contract.reasons import BETWEEN_TASKS
from submission_api.contract.record import ResultRecord, exit_status
from submission_api.contract.usage import RunUsage, StageMark
from submission_api.contract.verdict import (
    Verdict,
    VerdictKind,
    compose_message,
    decide_verdict,
    from_failure,
)
from submission_api.contract.wire import FinishBody
from submission_api.runner.scorer import (
    ParticipantFailure,
    read_meta_test_end,
    read_reported_status,
)
from worker.pipeline.errors import ParticipantFault, PlatformFault
from worker.pipeline.execute import ExecutionResult
from worker.pipeline.faults import INTERNAL_ERROR_FLAG

SCORE_TIMEOUT_S = 600.0
"""Backstop on scoring one run's output (bounded files, so seconds in practice)."""
ScoreOutput = Callable[..., Any]
"""`submission_api.runner.scorer.score_output(output_dir, answers_dir, duration_s)`."""


@dataclass(frozen=True)
class Outcome:
    """A run's final word, ready for `finish`."""

    state: str  # finished | failed | timed_out
    reason: str | None = None
    message: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    log: str = ""
    isolation: str | None = None
    """The run's isolation line (the task server's report), kept with the run (issue 34)."""
    usage: RunUsage | None = None
    """Per-stage CPU time and peak memory, and the stage marks (issue 38.6); the `publish`
    mark is added when the body is built."""
    stage: str | None = None
    """Where a failed run failed (`contract.wire.FailureStage`): the server's secrecy reads it."""
    meta_train_log: str | None = None
    """What meta-train alone wrote (`format_meta_train_log`): the part of the log the owner of
    a secret-data run may read; the server's secrecy reads this field, never `log`'s text."""

    def to_finish_body(self, fencing_token: int) -> dict[str, Any]:
        """The `finish` body (`submission_api.contract.wire.FinishBody`'s fields and bounds;
        tasks as `TaskRecord.to_dict` gives them)."""
        FinishBody(fencing_token, self.state, self.reason, self.message)  # type: ignore[arg-type]
        return {"fencing_token": fencing_token, "state": self.state, "reason": self.reason,
                "message": self.message, "summary": self.summary, "tasks": self.tasks,
                "log": self.log, "meta_train_log": self.meta_train_log,
                "isolation": self.isolation, "stage": self.stage,
                "usage": None if self.usage is None else with_mark(self.usage, "publish").to_json()}


def with_mark(usage: RunUsage, name: str, at: float | None = None) -> RunUsage:
    """`usage` with one more stage mark, at `at` (default: now)."""
    mark = StageMark(name, time.time() if at is None else at)  # type: ignore[arg-type]
    return replace(usage, marks=[*usage.marks, mark])


def run_usage(result: ExecutionResult, scoring_start: float) -> RunUsage:
    """What the executed run cost per stage and when its stages happened, through scoring."""
    usage = RunUsage(stages=list(result.stages), marks=list(result.marks))
    usage = with_mark(with_mark(usage, "scoring_start", scoring_start), "scoring_end")
    return replace(usage, tasks=result.task_times)


def build_record(result: ExecutionResult, output_dir: Path, answers_dir: Path, *,
                 time_limit_s: float | None = None,
                 memory_limit_mb: int | None = None) -> ResultRecord:
    """The fixed record of an executed run: the executor's facts, status.json (untrusted) and
    the task server's report of meta-test."""
    # The Docker sandbox's init reports a death by signal as 128 + n, local mode as -n.
    exit_code, signal = exit_status(result.exit_code, container=True)
    return ResultRecord(
        exit_code=exit_code, signal=signal,
        timed_out=result.timed_out, oom_killed=result.oom_killed,
        output_exceeded=result.output_exceeded, output_detail=result.output_detail,
        wall_time_s=result.wall_time_s, peak_memory_mb=result.peak_memory_mb,
        cpu_time_s=result.cpu_s, time_limit_s=time_limit_s, memory_limit_mb=memory_limit_mb,
        limit_hit="backstop" if result.host_starved else result.limit_hit, stall_s=result.stall_s,
        status=read_reported_status(output_dir), meta_test=read_meta_test_end(answers_dir),
        stderr_empty=not result.stderr.strip(),
        logs_truncated=result.stdout_truncated or result.stderr_truncated)


def decide_outcome(result: ExecutionResult, output_dir: Path, answers_dir: Path, *,
                   score_output: ScoreOutput, log_cap_bytes: int,
                   time_limit_s: float | None = None,
                   memory_limit_mb: int | None = None) -> Outcome:
    """The verdict on one executed run (`decide_verdict`); participant failures become `failed`.

    Raises:
        PlatformFault: the verdict is the platform's (a kill from outside the run).
    """
    log = format_log(result, log_cap_bytes)
    train_log = format_meta_train_log(result, log_cap_bytes)
    record = build_record(result, output_dir, answers_dir, time_limit_s=time_limit_s,
                          memory_limit_mb=memory_limit_mb)
    verdict = decide_verdict(record)
    isolation = read_isolation(answers_dir)
    if verdict.kind is VerdictKind.SCORE:
        try:
            scored = score_within(score_output, output_dir, answers_dir, result.wall_time_s)
        except ParticipantFailure as failure:
            verdict = from_failure(failure.reason, failure.message, failure.trace)
        else:
            return Outcome("finished", summary=dict(scored.summary),
                           tasks=[record.to_dict() for record in scored.records], log=log,
                           isolation=isolation, meta_train_log=train_log)
    return replace(verdict_outcome(verdict, log), isolation=isolation, meta_train_log=train_log)


def read_isolation(answers_dir: Path) -> str | None:
    """The isolation line the task server recorded, with whether the host's dentry cache was
    reset before the run (`worker/dentry_reset.py`); None: neither was recorded."""
    from submission_api.runner.task_server import read_report
    from worker.dentry_reset import read_record

    try:
        report = read_report(answers_dir)
    except (OSError, ValueError, TypeError):
        report = None
    parts = [report.isolation[:1000] if report is not None and report.isolation else None,
             read_record(answers_dir)]
    return "; ".join(part for part in parts if part) or None


def verdict_outcome(verdict: Verdict, log: str = "") -> Outcome:
    """The outcome a decided verdict is published as.

    Raises:
        PlatformFault: a platform verdict (the run is released, never charged).
    """
    if verdict.kind is VerdictKind.PLATFORM:
        raise PlatformFault(verdict.message)
    if verdict.kind is VerdictKind.UNEXPLAINED:
        # Ended now, uncharged, never retried; flagged so the server counts it against the
        # participant's daily allowance of such ends (services/runs.py) and charges past it.
        outcome = Outcome("failed", str(verdict.reason), verdict.full_message(), log=log,
                          stage=BETWEEN_TASKS)
        outcome.summary[INTERNAL_ERROR_FLAG] = True
        return outcome
    assert verdict.state is not None and verdict.reason is not None
    return Outcome(str(verdict.state), str(verdict.reason), verdict.full_message(), log=log,
                   stage=verdict.stage or BETWEEN_TASKS)


def score_within(score_output: ScoreOutput, output_dir: Path, answers_dir: Path,
                 duration_s: float, timeout_s: float = SCORE_TIMEOUT_S) -> Any:
    """`score_output(...)` in a daemon thread, given up after `timeout_s`.

    The scorer reads only bounded regular files, so this bound is a backstop: whatever in the
    participant's output might still stall it (issue 13: a FIFO did) must not hold the worker
    slot forever while the heartbeat keeps the lease alive. Its input is the participant's
    output, so running out of time is their outcome.

    Raises:
        ParticipantFailure: the scorer's own, or `bad_predictions` after `timeout_s`.
    """
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["scored"] = score_output(output_dir, answers_dir, duration_s=duration_s)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=work, name="arena-score", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise ParticipantFailure("bad_predictions", f"scoring the output folder took more than "
                                 f"{timeout_s:.0f} s; write only regular files of predictions "
                                 "(no FIFOs, sockets or huge trees) under output/.")
    if "error" in box:
        raise box["error"]
    return box["scored"]


def failure_outcome(reason: str, message: str, trace: str | None, log: str = "") -> Outcome:
    """A `failed` outcome whose message carries the traceback, both capped to fit the server."""
    return Outcome("failed", reason, compose_message(message, trace), log=log)


def fault_outcome(fault: ParticipantFault) -> Outcome:
    """The outcome of a participant fault found before execution (e.g. an unsafe zip)."""
    return failure_outcome(fault.reason, fault.message, fault.traceback)


LOG_FRAME = "==> arena log frame: meta-train {} + meta-test {} stdout, {} + {} stderr chars <=="
"""First line of a two-stage log: the section lengths, written before any participant text,
for the organizers who read the whole log. Nothing parses it: the owner's part travels apart
(`format_meta_train_log`, the finish body's `meta_train_log`)."""


def format_log(result: ExecutionResult, cap_bytes: int) -> str:
    """stdout then stderr, each kept to its last `cap_bytes` characters, marked when cut;
    when both stages ran, a first line gives how many characters of each came from each."""
    parts, frame = [], []
    for index, (name, text, truncated) in enumerate((
            ("stdout", result.stdout, result.stdout_truncated),
            ("stderr", result.stderr, result.stderr_truncated))):
        cut = truncated or len(text) > cap_bytes
        body = text[-cap_bytes:] if len(text) > cap_bytes else text
        note = " (truncated)" if cut else ""
        parts.append(f"==> {name}{note} <==\n{body}")
        if result.meta_train_chars is not None:
            train = max(0, min(result.meta_train_chars[index], len(text)) - (len(text) - len(body)))
            frame += [train, len(body) - train]
    head = [LOG_FRAME.format(*frame)] if frame else []
    return "\n".join(head + parts)


def format_meta_train_log(result: ExecutionResult, cap_bytes: int) -> str | None:
    """What meta-train alone wrote, stdout then stderr, each kept to its last `cap_bytes`
    characters: cut at the executor's own count of meta-train's characters
    (`meta_train_chars`), so nothing a test task prints can move the cut. None when the
    result does not say where meta-test began (the server then withholds the whole log)."""
    if result.meta_train_chars is None:
        return None
    parts = []
    for name, text, chars in (("stdout", result.stdout, result.meta_train_chars[0]),
                              ("stderr", result.stderr, result.meta_train_chars[1])):
        train = text[:chars]
        note = " (truncated)" if len(train) > cap_bytes else ""
        parts.append(f"==> meta-train {name}{note} <==\n{cap_tail(train, cap_bytes)}")
    return "\n".join(parts)
