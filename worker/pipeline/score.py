"""Score step: turn what the participant side did (an `ExecutionResult` and its `output/`) into
the run's final state, failure reason, message and log.

Order matters: a limit the sandbox enforced (time, memory, output size) explains any exit code,
so it is checked first; then a non-zero exit is attributed to the stage `status.json` reports;
only a clean exit is scored, by the runner's own `score_output`, against the kept answers.
Everything read from `output/` is untrusted; the runner's scorer reads it with that in mind.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from submission_api.runner.scorer import (
    STAGE_REASONS,
    ParticipantFailure,
    meta_test_failure,
    read_status,
)
from worker.pipeline.errors import ParticipantFault
from worker.pipeline.execute import ExecutionResult

SCORE_TIMEOUT_S = 600.0
"""Backstop on scoring one run's output (bounded files, so seconds in practice)."""
MESSAGE_CAP = 20_000
"""The server's limit on `finish.message` (server/schemas/internal.py)."""
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

    def to_finish_body(self, fencing_token: int) -> dict[str, Any]:
        return {"fencing_token": fencing_token, "state": self.state, "reason": self.reason,
                "message": self.message, "summary": self.summary, "tasks": self.tasks,
                "log": self.log}


def decide_outcome(result: ExecutionResult, output_dir: Path, answers_dir: Path, *,
                   score_output: ScoreOutput, log_cap_bytes: int) -> Outcome:
    """The verdict on one executed run; participant failures become `failed`, never raise."""
    log = format_log(result, log_cap_bytes)
    if result.timed_out:
        return Outcome("timed_out", "time_limit", f"the run exceeded its wall-clock limit and was "
                       f"stopped after {result.wall_time_s:.0f} s; make meta-training and "
                       "meta-testing faster or check for a hang (see the log).", log=log)
    if result.oom_killed:
        return Outcome("failed", "out_of_memory", "the run was killed for exceeding its memory "
                       "limit; use smaller batches or a smaller model.", log=log)
    if result.output_exceeded:
        return Outcome("failed", "bad_predictions", "the output folder exceeded its size limit; "
                       "write only predictions and a compact learner.", log=log)
    try:
        if result.exit_code != 0:
            # What the trusted task server saw of meta-test outranks the participant's status.json.
            raise (meta_test_failure(answers_dir)
                   or failure_from_status(output_dir, result.exit_code))
        scored = score_within(score_output, output_dir, answers_dir, result.wall_time_s)
    except ParticipantFailure as failure:
        return failure_outcome(failure.reason, failure.message, failure.trace, log)
    return Outcome("finished", summary=dict(scored.summary),
                   tasks=[record.to_dict() for record in scored.records], log=log)


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


def failure_from_status(output_dir: Path, exit_code: int | None) -> ParticipantFailure:
    """The failure a non-zero exit stands for, from the last stage `status.json` reported."""
    status = read_status(output_dir)
    stage = status.get("stage")
    trace = status.get("traceback")
    trace = str(trace) if trace else None
    error = status.get("error")
    if stage in STAGE_REASONS:
        where = f" on test task {status['task']}" if isinstance(status.get("task"), int) else ""
        if error:
            what = f"raised: {str(error)[:2000]}"
        else:
            what = (f"ended the process with exit code {exit_code} without reporting an error "
                    "(a crash or an explicit exit); the log may hold its traceback")
        return ParticipantFailure(STAGE_REASONS[stage], f"{stage}{where} {what}", trace)
    if stage == "meta_test":  # between tasks: after a fit, before or while predicting
        return ParticipantFailure("predict_error", f"the process died during meta-testing with "
                                  f"exit code {exit_code}; see the log.", trace)
    return ParticipantFailure("import_error", f"the participant side exited with code "
                              f"{exit_code} before reporting a stage (last: {stage!r}); check "
                              "that model.py imports with `arena run`, and see the log.", trace)


def failure_outcome(reason: str, message: str, trace: str | None, log: str = "") -> Outcome:
    """A `failed` outcome whose message carries the traceback, both capped to fit the server."""
    message = message[: MESSAGE_CAP // 4]
    if trace:
        room = MESSAGE_CAP - len(message) - 2
        message = f"{message}\n\n{trace[-room:]}"
    return Outcome("failed", reason, message, log=log)


def fault_outcome(fault: ParticipantFault) -> Outcome:
    """The outcome of a participant fault found before execution (e.g. an unsafe zip)."""
    return failure_outcome(fault.reason, fault.message, fault.traceback)


LOG_FRAME = "==> arena log frame: meta-train {} + meta-test {} stdout, {} + {} stderr chars <=="
"""First line of a two-stage log: the section lengths, written before any participant text,
so the server can serve meta-train's part alone (server/services/secrecy.py)."""


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
