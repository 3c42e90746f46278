"""`arena run`: one run of a submission on a participant's machine with the platform's own
preparation, participant side and scoring — the participant side in a subprocess, as the sandbox
runs it, so the two give the same score for the same seeds.

Output folder: `scores.json`, `detailed_results.html`, `predictions/`, `logs/`, and `.work/`
(the bundle and answers, kept for inspection).
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

DEFAULT_CACHE = Path(os.path.expanduser("~/.cache/metadl-arena"))


@dataclass
class LocalRunResult:
    state: str  # finished | failed | timed_out
    output_dir: Path
    scores: dict | None
    reason: str | None = None
    message: str | None = None


def _participant_command(submission_dir: Path, bundle_dir: Path, run_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "submission_api.runner.participant",
        "--submission",
        str(submission_dir),
        "--bundle",
        str(bundle_dir),
        "--output",
        str(run_dir),
    ]


def _run_participant(
    command: list[str], run_dir: Path, time_limit_s: float | None, show_progress: bool
) -> tuple[int, bool, float]:
    """Run the participant side; returns (exit code, timed out, seconds). Logs go to run_dir."""
    started = time.monotonic()
    project_root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            p for p in (project_root, os.environ.get("PYTHONPATH", "")) if p
        ),
    }
    with (run_dir / "stdout.txt").open("wb") as out, (run_dir / "stderr.txt").open("wb") as err:
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


def compute_scores_document(scored: ScoredRun) -> dict:
    """The scores.json document: headline score, CI half-width, per-task records."""
    summary = scored.summary
    tasks = [{"ways": r.n_ways, "shots": r.n_shots, **r.to_dict()} for r in scored.records]
    return {
        "score": summary["mean"],
        "ci95": summary["ci95"],
        "n_tasks": summary["n_tasks"],
        "duration_s": summary.get("duration_s"),
        "summary": summary,
        "tasks": tasks,
    }


def write_scores(
    output_dir: Path, scored: ScoredRun, title: str, protocol: str | None = None
) -> dict:
    """Write scores.json and detailed_results.html; return the scores document."""
    from submission_api.report import write_detailed_results

    document = compute_scores_document(scored)
    (output_dir / "scores.json").write_text(json.dumps(document, indent=2))
    write_detailed_results(
        scored.summary,
        scored.records,
        output_dir / "detailed_results.html",
        title=title,
        protocol=protocol,
        duration_s=scored.summary.get("duration_s"),
    )
    return document


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
) -> LocalRunResult:
    """Meta-train and meta-test a submission folder locally and score it."""
    protocol = protocol or ProtocolParams(name="cross-domain")
    output_dir = output_dir.resolve()
    work = output_dir / ".work"
    shutil.rmtree(work, ignore_errors=True)
    for stale in ("predictions", "logs", "learner", "scores.json", "status.json", "progress.json"):
        target = output_dir / stale
        shutil.rmtree(target, ignore_errors=True) if target.is_dir() else target.unlink(
            missing_ok=True
        )
    output_dir.mkdir(parents=True, exist_ok=True)
    collection = load_collection(Path(collection_dir), cache_dir or DEFAULT_CACHE)
    prepare_run(
        collection, protocol, (phase_seed, seed), work / "bundle", work / "answers", threads
    )
    command = _participant_command(Path(submission_dir).resolve(), work / "bundle", output_dir)
    code, timed_out, seconds = _run_participant(command, output_dir, time_limit_s, show_progress)
    if timed_out:
        return LocalRunResult(
            "timed_out",
            output_dir,
            None,
            "time_limit",
            f"the run exceeded its time limit of {time_limit_s:g} s and was stopped",
        )
    try:
        if code != 0:
            check_status(output_dir)
            return LocalRunResult(
                "failed",
                output_dir,
                None,
                "crashed",
                f"the participant side exited with code {code}; see stderr.txt",
            )
        scored = score_output(output_dir, work / "answers", duration_s=seconds)
    except ParticipantFailure as failure:
        message = failure.message + (f"\n{failure.trace}" if failure.trace else "")
        return LocalRunResult("failed", output_dir, None, failure.reason, message)
    scores = write_scores(
        output_dir,
        scored,
        title=f"{Path(submission_dir).name} — {protocol.name}",
        protocol=protocol.name,
    )
    return LocalRunResult("finished", output_dir, scores)
