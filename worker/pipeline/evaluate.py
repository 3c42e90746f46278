"""The evaluation of one run, start to end: claim, fetch, prepare, execute, score, publish.

Plain functions over a `Runtime` of collaborators (client, executor, the runner's preparation
and scoring), so tests pass fakes and `worker.pipeline.wiring` passes the real ones. The rules
that make a job safe to deliver twice live here:
- a run that cannot be claimed (finished, or leased by someone else) ends the job quietly;
- a platform fault releases the run, uncharged, and the job ends without raising, so Celery does
  not run it again: the server re-queues it. Platform faults are a closed list
  (`is_platform_fault`): the pipeline's named faults, the server unreachable or refusing, and
  the host's own resources failing (disk full, I/O error, out of descriptors);
- anything else is a bug: the run ends at once as `platform_error` marked `internal_error`
  (logged loudly, never retried); the server charges it once its participant met a few today;
- a heartbeat answered 409 means the run was taken away: the participant side is killed and
  nothing is published; the fencing token would refuse our writes anyway.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from worker.client import (
    ClaimedRun,
    InternalClient,
    RunId,
)
from worker.host_lock import HostHold, HostLock
from worker.live_tail import LiveTail
from worker.output_walk import remove_tree
from worker.pipeline.errors import ParticipantFault
from worker.pipeline.execute import Executor, Heartbeat, build_request
from worker.pipeline.faults import (
    HOST_ERRNOS,
    INTERNAL_ERROR_FLAG,
    PHASE_ERROR,
    EngineCheck,
    HostUnhealthyError,
    check_host,
    is_platform_fault,
)
from worker.pipeline.fetch import extract_submission, fetch_datasets, fetch_submission
from worker.pipeline.prepare import ParseProtocol, PrepareRun, build_collection, prepare_bundle
from worker.pipeline.progress import make_readable, read_progress
from worker.pipeline.publish import publish_outcome, release_run
from worker.pipeline.score import (
    Outcome,
    ScoreOutput,
    decide_outcome,
    failure_outcome,
    fault_outcome,
    run_usage,
)

log = logging.getLogger(__name__)

class RunResult(StrEnum):
    """How a job ended, for its log line and for tests."""

    NOT_CLAIMED = "not_claimed"
    PUBLISHED = "published"
    FENCED = "fenced"
    LOST = "lost"
    RELEASED = "released"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class Runtime:
    """Everything one evaluation needs besides the run's id and token."""

    client: InternalClient
    execute: Executor
    prepare_run: PrepareRun
    parse_protocol: ParseProtocol
    score_output: ScoreOutput
    worker_name: str
    cache_dir: Path
    runs_dir: Path
    gpu_ids: tuple[str, ...] = ()
    heartbeat_interval_s: float = 30.0
    log_cap_bytes: int = 64 * 1024
    default_image: str = "metadl-arena/sandbox:cpu"
    deployment: str = "local"
    """Names this deployment's sandbox containers (see `execute.container_prefix`)."""
    engine_check: EngineCheck | None = None
    """Raises when the Docker engine does not answer (None: the local executor has none)."""
    cpuset: str | None = None
    """This slot's own host cores (`worker.cpu_plan.slot_cpuset`); None: not pinned."""
    wall_backstop_factor: float = 1.0
    """`ExecutionRequest.wall_backstop_factor` (settings: 3)."""
    min_free_bytes: int = 512 * 1024**2
    """Free space the worker's runs and cache folders need before it claims a run: a full
    disk would fail every run it took (1 bad worker of 2: each run 1 in 8 to fail 3 times)."""
    host_lock: HostLock | None = None
    """Held around each run's execution, exclusively for a secret phase's (`worker.host_lock`);
    None: nothing held (tests)."""


def evaluate_run(run_id: RunId, run_token: str, rt: Runtime) -> RunResult:
    """Evaluate one run end to end.

    Raises:
        ServerUnavailableError: only from the claim or `check_host` (nothing is held yet), so
            the job may retry.
    """
    # Before the claim: a run this host cannot serve stays with the broker, and the server
    # hears why (the workers page shows the worker unhealthy until a claim goes through).
    try:
        check_host((rt.runs_dir, rt.cache_dir), rt.min_free_bytes, rt.worker_name,
                   rt.engine_check)
    except HostUnhealthyError as exc:
        rt.client.report_unhealthy(run_id, run_token, rt.worker_name, str(exc))
        raise
    claimed = rt.client.claim(run_id, run_token, rt.worker_name)
    if claimed is None:
        log.info("run.claim.skipped", extra={"run_id": run_id})
        return RunResult.NOT_CLAIMED
    started = time.monotonic()
    log.info("run.claimed", extra={"run_id": run_id, "fencing_token": claimed.fencing_token,
                                   "time_limit_s": claimed.time_limit_s,
                                   "image": claimed.image or rt.default_image})

    work: Path | None = None
    live_tail = LiveTail()

    def beat(stage: str) -> bool:
        progress = running_progress(work, live_tail) if stage == "running" else None
        return rt.client.heartbeat(run_id, run_token, claimed.fencing_token, stage,
                                   progress=progress)

    heartbeat = Heartbeat(beat, rt.heartbeat_interval_s, stage="preparing")
    try:
        work = _make_work_dir(rt.runs_dir, run_id)
        with heartbeat:
            outcome = evaluate_claimed(claimed, run_token, rt, work, heartbeat, live_tail)
        if outcome is None:
            log.warning("run.lost", extra={"run_id": run_id})
            return RunResult.LOST
        # A verdict is published even when a beat was answered 409 meanwhile: the fencing token
        # decides whether it is written, and a late beat must never throw a result away (D4).
        result = (RunResult.PUBLISHED if publish_outcome(rt.client, claimed, run_token, outcome)
                  else RunResult.FENCED)
        log_run_end(run_id, outcome.state, outcome.reason, outcome.summary.get("mean"),
                    started, result)
        return result
    except Exception as exc:  # noqa: BLE001 - an unforeseen bug must not leave the run stuck
        if is_platform_fault(exc):
            result = _release(rt.client, claimed, run_token, exc)
            log_run_end(run_id, "released", compute_short_cause(exc), None, started, result)
            return result
        # Not a named transient fault: a retry would meet the same bug and spend the phase's
        # limits again, so the run ends now; the traceback stays in the worker's log.
        log.exception("run.pipeline.crashed", extra={"run_id": run_id,
                                                     "error": f"{type(exc).__name__}: {exc}"})
        return _publish(rt.client, claimed, run_token, internal_error_outcome(rt.worker_name))
    finally:
        if work is not None:
            remove_tree(work)  # the participant shaped output/: iterative, never raises


def evaluate_claimed(claimed: ClaimedRun, run_token: str, rt: Runtime, work: Path,
                     heartbeat: Heartbeat, live_tail: LiveTail | None = None) -> Outcome | None:
    """Fetch, prepare, execute and score a claimed run; `None` when the lease was lost.

    Raises:
        PlatformFault, ServerUnavailableError, OSError: infrastructure faults (caller releases).
    """
    zip_path = fetch_submission(rt.client, claimed, run_token, rt.cache_dir)
    try:
        submission_dir = extract_submission(zip_path, work / "submission")
    except ParticipantFault as fault:
        return fault_outcome(fault)
    except OSError as exc:
        if exc.errno in HOST_ERRNOS:
            raise
        # The zip passed the checker yet its names or shape cannot be written here: the
        # participant's input, so their verdict (never three platform retries).
        return failure_outcome("invalid_submission", f"the submission zip could not be "
                               f"extracted: {exc.strerror or exc} ({type(exc).__name__}); "
                               "expected short relative names in a shallow tree — zip your "
                               "folder with `arena zip`.", None)
    make_readable(work / "submission")
    entries = fetch_datasets(rt.client, claimed, run_token, rt.cache_dir)
    collection = build_collection(claimed, entries)
    bundle_dir, answers_dir, output_dir = work / "bundle", work / "answers", work / "output"
    try:
        prepare_bundle(claimed, collection, bundle_dir, answers_dir,
                       prepare_run=rt.prepare_run, parse_protocol=rt.parse_protocol)
    except ValueError as exc:
        # The phase asks for tasks its datasets cannot give: retrying cannot help, and the
        # participant is not at fault, so the run ends at once as an uncharged platform error.
        return failure_outcome(PHASE_ERROR, f"this phase cannot be evaluated on its datasets: "
                               f"{exc} Organizers: fix the phase's protocol or data, then "
                               "re-run; this submission is not charged to any quota.", None)
    answers_dir.chmod(0o700)  # defence in depth: only the worker's user reads the labels
    output_dir.mkdir()
    request = build_request(claimed, submission_dir, bundle_dir, output_dir, rt.gpu_ids,
                            rt.log_cap_bytes, rt.default_image, rt.deployment, answers_dir,
                            live_tail, rt.cpuset, rt.wall_backstop_factor)
    with _hold_host(rt.host_lock, claimed.exclusive_host, heartbeat) as held:
        if held is False or not _enter_stage(heartbeat, "running"):
            return None
        log.info("run.sandbox.started", extra={"run_id": claimed.run_id,
                                               "gpus": request.gpu_ids})
        result = rt.execute(request, heartbeat.cancel)
    log.info("run.sandbox.finished", extra={"run_id": claimed.run_id,
                                            "exit_code": result.exit_code,
                                            "wall_time_s": result.wall_time_s})
    if not _enter_stage(heartbeat, "scoring"):
        return None
    scoring_start = time.time()
    outcome = decide_outcome(result, output_dir, answers_dir, score_output=rt.score_output,
                             log_cap_bytes=rt.log_cap_bytes)
    if isinstance(held, HostHold):  # the isolation line says whether it had the host alone
        outcome = replace(outcome, isolation="; ".join(
            part for part in (outcome.isolation, held.line) if part))
    return replace(outcome, usage=run_usage(result, scoring_start))  # issue 38.6


def running_progress(work: Path | None, live_tail: LiveTail) -> dict[str, Any] | None:
    """A running beat's progress: step and test tasks (`read_progress`) and the output's last
    lines as `log_tail` (the server decides who may read them); None when there is neither."""
    progress = dict(read_progress(work) or {}) if work is not None else {}
    tail = live_tail.text()
    if tail:
        progress["log_tail"] = tail
    return progress or None


def log_run_end(run_id: RunId, state: str, reason: str | None, score: float | None,
                started: float, result: RunResult) -> None:
    """The one line an operator reads per run: how it ended, its score or why not, how long."""
    fields = {"run_id": run_id, "state": state, "duration_s": round(time.monotonic() - started, 1),
              "result": str(result)}
    fields |= {"score": round(score, 4)} if score is not None else {"reason": reason}
    level = logging.INFO if state == "finished" else logging.WARNING
    log.log(level, "run.finished", extra=fields)
def internal_error_outcome(worker_name: str) -> Outcome:
    """The outcome of a run ended by a bug (neither the participant's nor a named fault)."""
    outcome = failure_outcome(
        PHASE_ERROR, f"the platform failed while evaluating this run (an internal error on "
        f"worker {worker_name!r}, logged for the operators); it is not charged to any quota "
        "unless you met several today. Submit again later or tell the organizers.", None)
    outcome.summary[INTERNAL_ERROR_FLAG] = True
    return outcome


def _make_work_dir(runs_dir: Path, run_id: RunId) -> Path:
    """A fresh scratch folder for one attempt (bundle, answers, output); removed at the end."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"run-{run_id}-", dir=runs_dir))
    os.chmod(work, 0o755)  # the sandbox user (not ours) must traverse to its read-only mounts
    return work


@contextmanager
def _hold_host(lock: HostLock | None, exclusive: bool,
               heartbeat: Heartbeat) -> Iterator[HostHold | bool]:
    """The host lock around the run's reset, pre-fault and both stages (`worker.host_lock`;
    still `preparing` while it waits): the hold; False when the run was taken away meanwhile;
    True with no lock."""
    if lock is None:
        yield True
        return
    with lock.hold(exclusive, heartbeat.cancel) as hold:
        yield False if hold is None else hold


def _enter_stage(heartbeat: Heartbeat, stage: str) -> bool:
    """Report a new stage at once; False when the run was taken away meanwhile."""
    if heartbeat.lost.is_set():
        return False
    heartbeat.stage = stage
    return heartbeat.beat_now()


def _release(client: InternalClient, claimed: ClaimedRun, run_token: str,
             exc: BaseException) -> RunResult:
    """Hand the run back with a short cause (what the participant reads on the run); the
    details (engine URLs, host paths) go to this worker's log and, through `detail`, to its row
    on the server (admins only)."""
    detail = f"{type(exc).__name__}: {exc}"
    log.warning("run.platform_fault", extra={"run_id": claimed.run_id, "error": detail})
    if release_run(client, claimed, run_token, compute_short_cause(exc), detail):
        return RunResult.RELEASED
    return RunResult.UNREACHABLE


def compute_short_cause(exc: BaseException) -> str:
    """A participant-safe line for a platform fault: the first `short_cause` found along the
    exception's causes, else its type and the first line of its message, capped."""
    seen: BaseException | None = exc
    while seen is not None:
        short = getattr(seen, "short_cause", None)
        if isinstance(short, str) and short:
            return short
        seen = seen.__cause__
    first_line = (str(exc).splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first_line[:200]}"


def _publish(client: InternalClient, claimed: ClaimedRun, run_token: str,
                        outcome: Outcome) -> RunResult:
    if publish_outcome(client, claimed, run_token, outcome):
        return RunResult.PUBLISHED
    return RunResult.FENCED  # or unreachable: either way the lease lapses and the server acts
