"""`arena run`: one run of a submission on a participant's machine with the platform's own
preparation, stages and scoring — meta-train in a subprocess, then each test task in a process of
its own released by a task server in this process (`submission_api.runner.stages`), as the
sandbox runs them, so the two give the same score for the same seeds.

Output folder: `scores.json`, `detailed_results.html`, `predictions/`, `logs/`, `learner/`,
`stdout.txt`, `stderr.txt`. The working folder `.work/` (meta-train view, task plan, answers) is
removed when the run ends, however it ends, unless `keep_work` asks to keep it for debugging.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import shutil
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from submission_api.contract.record import ResultRecord, exit_status
from submission_api.contract.states import RunState
from submission_api.contract.verdict import Verdict, VerdictKind, decide_verdict, from_failure
from submission_api.data import load_collection
from submission_api.data.collection import with_phase_splits
from submission_api.protocols import ProtocolParams
from submission_api.runner.heap import with_huge_pages
from submission_api.runner.limited import run_limited
from submission_api.runner.prepare import prepare_run
from submission_api.runner.progress import ProgressView
from submission_api.runner.scorer import (
    ParticipantFailure,
    ScoredRun,
    read_meta_test_end,
    read_reported_status,
    score_output,
)
from submission_api.runner.stages import (
    compute_task_seed,
    meta_test_command,
    meta_train_command,
    read_run_info,
    run_meta_test,
)
from submission_api.runner.task_server import PREDICTIONS

DEFAULT_CACHE = Path(os.path.expanduser("~/.cache/metadl-arena"))


@dataclass
class LocalRunResult:
    state: str  # finished | failed | timed_out (RunState)
    output_dir: Path
    scores: dict | None
    reason: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class StageRun:
    """How one stage's process ended (the facts of the result record)."""

    exit_code: int
    timed_out: bool
    seconds: float
    oom_killed: bool = False
    """Evidence only: the OOM killer ended a process of our cgroup during the stage."""
    stderr_empty: bool = False
    truncated: bool = False


LOG_CAP_BYTES = 1 << 20
"""Kept of each of stdout and stderr per stage: the first and last half MiB, as the platform
keeps head and tail (`submission_api.log_text`), so a flood cannot fill the disk."""


def _run_participant(
    command: list[str], run_dir: Path, time_limit_s: float | None, show_progress: bool,
    extra_env: dict[str, str] | None = None,
) -> StageRun:
    """Run one stage until it ends or its time limit passes (`runner.limited.run_limited`, as
    the worker's local mode does). Its logs, capped to their head and tail, are appended to
    run_dir/stdout.txt and stderr.txt."""
    project_root = str(Path(__file__).resolve().parents[2])
    env = with_huge_pages({
        **os.environ,
        **(extra_env or {}),
        "PYTHONPATH": os.pathsep.join(
            p for p in (project_root, os.environ.get("PYTHONPATH", "")) if p
        ),
    })
    view = ProgressView(run_dir, time_limit_s, enabled=show_progress)
    with view:
        ran = run_limited(command, env=env, time_limit_s=time_limit_s,
                          log_cap_bytes=LOG_CAP_BYTES, on_poll=view.refresh)
    for name, text in (("stdout.txt", ran.stdout), ("stderr.txt", ran.stderr)):
        with (run_dir / name).open("a", encoding="utf-8") as log:
            log.write(text)
    return StageRun(ran.exit_code, ran.timed_out, ran.seconds, oom_killed=ran.oom_killed,
                    stderr_empty=not ran.stderr.strip(),
                    truncated=ran.stdout_truncated or ran.stderr_truncated)


def compute_scores_document(scored: ScoredRun, protocol: ProtocolParams) -> dict:
    """The scores.json document: the phase's headline (its ranking metric, as the platform
    scores one run: `scoring.aggregate`), the CI half-width, the task mean, per-task records."""
    from submission_api.scoring.aggregate import compute_submission_score
    from submission_api.scoring.summary import read_metric_cells

    summary = scored.summary
    headline = compute_submission_score([read_metric_cells(summary)], *protocol.ranking)
    tasks = [{"ways": r.n_ways, "shots": r.n_shots, **r.to_dict()} for r in scored.records]
    return {
        "score": headline.score,
        "metric": headline.metric,
        "mean": summary["mean"],
        "ci95": summary["ci95"],
        "n_tasks": summary["n_tasks"],
        "duration_s": summary.get("duration_s"),
        "summary": summary,
        "tasks": tasks,
    }


def write_scores(output_dir: Path, scored: ScoredRun, title: str,
                 protocol: ProtocolParams) -> dict:
    """Write scores.json and detailed_results.html; return the scores document."""
    from submission_api.report import write_detailed_results

    document = compute_scores_document(scored, protocol)
    (output_dir / "scores.json").write_text(json.dumps(document, indent=2))
    write_detailed_results(
        scored.summary,
        scored.records,
        output_dir / "detailed_results.html",
        title=title,
        protocol=protocol.name,
        duration_s=scored.summary.get("duration_s"),
    )
    return document


REPORT_MODULES = ("jinja2", "matplotlib.figure", "matplotlib.backends.backend_agg",
                  "matplotlib.ticker", "submission_api.report", "submission_api.scoring.aggregate",
                  "submission_api.scoring.summary")
"""What scoring and the report import after the last task (matplotlib: most of a second on a
quiet host): imported while meta-train runs instead, when this process only waits (issue 38.2)."""


def import_while_waiting(names: Sequence[str]) -> threading.Thread:
    """Import `names` in a thread of this process (what fails is imported again, with its
    error, where it is used). The caller joins it before it goes on to import anything itself:
    meanwhile it only waits (for meta-train), so no two threads import the same modules."""
    def imports() -> None:
        for name in names:
            with contextlib.suppress(Exception):
                importlib.import_module(name)

    thread = threading.Thread(target=imports, name="arena-report-imports", daemon=True)
    thread.start()
    return thread


def _set_writable(tree: Path, writable: bool) -> None:
    """The learner is read-only while tasks run (Landlock enforces it where the kernel has it);
    made writable again afterwards so the participant can delete or replace it."""
    for path in [tree, *tree.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(mode | 0o200 if writable else mode & ~0o222)


def run_local(
    submission_dir: Path,
    collection_dir: Path,
    output_dir: Path,
    protocol: ProtocolParams | None = None,
    seed: int = 0,
    phase_seed: int = 0,
    time_limit_s: float | None = None,
    threads: int = 1,
    cache_dir: Path | None = None,
    show_progress: bool = False,
    keep_work: bool = False,
    splits: dict[str, list[str]] | None = None,
) -> LocalRunResult:
    """Meta-train and meta-test a submission folder locally and score it; `splits` (a phase's
    roles, `arena run --protocol-file`) replace the collection's `meta_splits.txt`."""
    protocol = protocol or ProtocolParams(name="cross-domain")
    output_dir = output_dir.resolve()
    work = output_dir / ".work"
    shutil.rmtree(work, ignore_errors=True)
    for stale in ("predictions", "logs", "learner", "scores.json", "status.json", "progress.json",
                  "stdout.txt", "stderr.txt"):
        target = output_dir / stale
        if target.is_dir():
            _set_writable(target, True)
            shutil.rmtree(target, ignore_errors=True)
        else:
            target.unlink(missing_ok=True)
    output_dir.mkdir(parents=True, exist_ok=True)
    try:
        return _run_and_score(Path(submission_dir).resolve(), Path(collection_dir), output_dir,
                              work, protocol, (phase_seed, seed), time_limit_s, threads,
                              cache_dir or DEFAULT_CACHE, show_progress, splits)
    finally:
        if (output_dir / "learner").is_dir():
            _set_writable(output_dir / "learner", True)
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)


def build_record(stage: StageRun, output_dir: Path, answers: Path,
                 time_limit_s: float | None) -> ResultRecord:
    """The fixed record of the stage that ended the run, as the worker builds its own
    (`worker.pipeline.score.build_record`): the same files, the same verdict."""
    exit_code, signal = exit_status(stage.exit_code, container=False)
    return ResultRecord(
        exit_code=exit_code, signal=signal,
        timed_out=stage.timed_out, oom_killed=stage.oom_killed, wall_time_s=stage.seconds,
        time_limit_s=time_limit_s, status=read_reported_status(output_dir),
        meta_test=read_meta_test_end(answers), stderr_empty=stage.stderr_empty,
        logs_truncated=stage.truncated)


def _result(verdict: Verdict, output_dir: Path) -> LocalRunResult:
    """A decided verdict as `arena run` reports it; a platform verdict (a kill from outside,
    which nothing retries here) is reported failed with the platform's reason."""
    state = verdict.state or RunState.FAILED
    return LocalRunResult(str(state), output_dir, None, str(verdict.reason),
                          verdict.full_message())


def _run_and_score(submission: Path, collection_dir: Path, output_dir: Path, work: Path,
                   protocol: ProtocolParams, seed: tuple[int, int], time_limit_s: float | None,
                   threads: int, cache_dir: Path, show_progress: bool,
                   splits: dict[str, list[str]] | None = None) -> LocalRunResult:
    collection = load_collection(collection_dir, cache_dir)
    if splits is not None:
        collection = with_phase_splits(collection, splits)
    bundle, answers = work / "bundle", work / "answers"
    prepare_run(collection, protocol, seed, bundle, answers, threads)
    python = sys.executable
    command = meta_train_command(python, str(submission), str(bundle), str(output_dir))
    importing = import_while_waiting(REPORT_MODULES)
    try:
        train = _run_participant(command, output_dir, time_limit_s, show_progress)
    finally:
        importing.join()
    verdict = decide_verdict(build_record(train, output_dir, answers, time_limit_s))
    if verdict.kind is not VerdictKind.SCORE:
        return _result(verdict, output_dir)
    learner, scratch = output_dir / "learner", work / "scratch"
    scratch.mkdir(parents=True)
    _set_writable(learner, False)
    remaining = None if time_limit_s is None else max(0.0, time_limit_s - train.seconds)
    test_command = meta_test_command(python, "", str(submission), str(learner),
                                     [str(scratch)], compute_task_seed(read_run_info(bundle)),
                                     threads)
    env = {"TMPDIR": str(scratch), "HOME": str(scratch)}

    def launch(control: Path) -> StageRun:
        test_command[test_command.index("--control") + 1] = str(control)
        return _run_participant(test_command, output_dir, remaining, show_progress, env)

    test, _report = run_meta_test(
        answers, work / "channel", remaining if remaining is not None else 10.0**9, launch,
        progress_path=output_dir / "progress.json")
    test = StageRun(test.exit_code, test.timed_out, train.seconds + test.seconds,
                    test.oom_killed, test.stderr_empty, test.truncated)
    verdict = decide_verdict(build_record(test, output_dir, answers, time_limit_s))
    if verdict.kind is not VerdictKind.SCORE:
        return _result(verdict, output_dir)
    try:
        scored = score_output(output_dir, answers, duration_s=test.seconds)
    except ParticipantFailure as failure:
        return _result(from_failure(failure.reason, failure.message, failure.trace), output_dir)
    shutil.copytree(answers / PREDICTIONS, output_dir / "predictions", dirs_exist_ok=True)
    scores = write_scores(output_dir, scored, title=f"{submission.name} — {protocol.name}",
                          protocol=protocol)
    return LocalRunResult(str(RunState.FINISHED), output_dir, scores)
