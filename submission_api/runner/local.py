"""`arena run`: one run of a submission on a participant's machine with the platform's own
preparation, stages and scoring — meta-train in a subprocess, then each test task in a process of
its own released by a task server in this process (`submission_api.runner.stages`), as the
sandbox runs them, so the two give the same score for the same seeds.

Output folder: `scores.json`, `detailed_results.html`, `predictions/`, `logs/`, `learner/`,
`stdout.txt`, `stderr.txt`. The working folder `.work/` (meta-train view, task plan, answers) is
removed when the run ends, however it ends, unless `keep_work` asks to keep it for debugging.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner.prepare import prepare_run
from submission_api.runner.progress import ProgressView
from submission_api.runner.scorer import (
    ParticipantFailure,
    ScoredRun,
    check_status,
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
    state: str  # finished | failed | timed_out
    output_dir: Path
    scores: dict | None
    reason: str | None = None
    message: str | None = None


def _run_participant(
    command: list[str], run_dir: Path, time_limit_s: float | None, show_progress: bool,
    extra_env: dict[str, str] | None = None,
) -> tuple[int, bool, float]:
    """Run one stage; returns (exit code, timed out, seconds). Logs are appended in run_dir."""
    started = time.monotonic()
    project_root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        **(extra_env or {}),
        "PYTHONPATH": os.pathsep.join(
            p for p in (project_root, os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    with (run_dir / "stdout.txt").open("ab") as out, (run_dir / "stderr.txt").open("ab") as err:
        process = subprocess.Popen(command, stdout=out, stderr=err, env=env, start_new_session=True)
        view = ProgressView(run_dir, time_limit_s, enabled=show_progress)
        timed_out = False
        with view:
            while process.poll() is None:
                view.refresh()
                if time_limit_s is not None and time.monotonic() - started > time_limit_s:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    timed_out = True
                    break
                time.sleep(0.2)
            view.refresh()
    return process.returncode, timed_out, time.monotonic() - started


def compute_scores_document(scored: ScoredRun, protocol: ProtocolParams) -> dict:
    """The scores.json document: the phase's headline (its ranking metric, as the platform
    scores one run: `scoring.aggregate`), the CI half-width, the task mean, per-task records."""
    from submission_api.scoring.aggregate import compute_submission_score
    from submission_api.scoring.summary import read_metric_cells

    summary = scored.summary
    headline = compute_submission_score([read_metric_cells(summary)], protocol.metric or "score",
                                        protocol.aggregation)
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
) -> LocalRunResult:
    """Meta-train and meta-test a submission folder locally and score it."""
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
                              cache_dir or DEFAULT_CACHE, show_progress)
    finally:
        if (output_dir / "learner").is_dir():
            _set_writable(output_dir / "learner", True)
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)


def _timed_out(output_dir: Path, time_limit_s: float | None) -> LocalRunResult:
    return LocalRunResult("timed_out", output_dir, None, "time_limit",
                          f"the run exceeded its time limit of {time_limit_s:g} s and was stopped")


def _run_and_score(submission: Path, collection_dir: Path, output_dir: Path, work: Path,
                   protocol: ProtocolParams, seed: tuple[int, int], time_limit_s: float | None,
                   threads: int, cache_dir: Path, show_progress: bool) -> LocalRunResult:
    collection = load_collection(collection_dir, cache_dir)
    bundle, answers = work / "bundle", work / "answers"
    prepare_run(collection, protocol, seed, bundle, answers, threads)
    python = sys.executable
    command = meta_train_command(python, str(submission), str(bundle), str(output_dir))
    code, timed_out, train_s = _run_participant(command, output_dir, time_limit_s, show_progress)
    if timed_out:
        return _timed_out(output_dir, time_limit_s)
    try:
        if code != 0:
            check_status(output_dir)
            return LocalRunResult("failed", output_dir, None, "crashed",
                                  f"meta-training exited with code {code} without reporting an "
                                  "error; see stderr.txt")
        learner, scratch = output_dir / "learner", work / "scratch"
        scratch.mkdir(parents=True)
        _set_writable(learner, False)
        remaining = None if time_limit_s is None else max(0.0, time_limit_s - train_s)
        test_command = meta_test_command(python, "", str(submission), str(learner),
                                         [str(scratch)], compute_task_seed(read_run_info(bundle)),
                                         threads)
        env = {"TMPDIR": str(scratch), "HOME": str(scratch)}

        def launch(control: Path) -> tuple[int, bool, float]:
            test_command[test_command.index("--control") + 1] = str(control)
            return _run_participant(test_command, output_dir, remaining, show_progress, env)

        (_, timed_out, test_s), _report = run_meta_test(
            answers, work / "channel", remaining if remaining is not None else 10.0**9, launch,
            progress_path=output_dir / "progress.json")
        if timed_out:
            return _timed_out(output_dir, time_limit_s)
        scored = score_output(output_dir, answers, duration_s=train_s + test_s)
    except ParticipantFailure as failure:
        message = failure.message + (f"\n{failure.trace}" if failure.trace else "")
        return LocalRunResult("failed", output_dir, None, failure.reason, message)
    shutil.copytree(answers / PREDICTIONS, output_dir / "predictions", dirs_exist_ok=True)
    scores = write_scores(output_dir, scored, title=f"{submission.name} — {protocol.name}",
                          protocol=protocol)
    return LocalRunResult("finished", output_dir, scores)
