"""The per-task root's copy per run against the worker's shared read-only copy (issue 38),
interleaved in one sitting, through `make_docker_executor` as the worker runs a meta-test:

- cost: the meta-test container's wall and CPU time (its cgroup: what the participant is
  charged), its peak memory, and the supervisor's start-up (`startup_s`: container start to its
  hello, where the per-run copy is made);
- the dentry channel: the model of `tests/integration/sandbox/test_sandbox_task_root.py` (256
  bits, 2 names read a bit, 7 folders, 4 tasks a run) with one tag for every run, so each run's
  first task reads the slots earlier runs wrote (across runs: through the shared copy when both
  were shared, an intervening per-run-copy run between) and each later task the slots earlier
  tasks of its run wrote (across tasks). No dentry reset between runs (the worst case).

    .venv/bin/python benchmarks/bench_task_root_shared.py [--rounds 3] [--image IMAGE] [--trivial]

`--trivial`: a learner that does nothing (the cost alone, no dentry readings).

Measured 2026-12-05 on the loaded 2-core host (3 runs each, interleaved), per-run copy -> shared
copy: the dentry model (load 6.7-8.2): meta-test CPU 4.42-4.51 -> 2.69-2.87 s, peak 520-521 ->
203-205 MB, wall medians 13.0 -> 7.4 s; across tasks 40.2-58.6% (224 readings), across runs
41.0-57.8% (49). Trivial (load 7.3-11.5): CPU 3.84-5.37 -> 2.09-2.20 s, peak 501-519 -> 197-201
MB, wall medians 32.9 -> 13.1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration" / "sandbox"))
from test_sandbox_task_root import FOLDERS, FOUR_TASKS, MODEL  # noqa: E402

from starting_kit.sample_data import generate_collection  # noqa: E402
from submission_api.data import load_collection  # noqa: E402
from submission_api.runner.prepare import prepare_run  # noqa: E402
from submission_api.runner.task_server import read_report  # noqa: E402
from worker.pipeline.execute import ExecutionRequest, make_docker_executor  # noqa: E402

TRIVIAL = MODEL.replace("        # first read every slot",
                        "        return MyPredictor()\n        #")


def one_run(client: docker.DockerClient, image: str, shared: bool, tag: str, collection: Path,
            cache: Path, scratch: Path, model: str = MODEL) -> dict:
    base = scratch / uuid.uuid4().hex[:8]
    submission = base / "submission"
    submission.mkdir(parents=True)
    (submission / "model.py").write_text(model.replace("@TAG@", tag).replace(
        "@FOLDERS@", repr(FOLDERS)))
    work = base / "run"
    prepare_run(load_collection(collection, cache), FOUR_TASKS, (0, 0), work / "bundle",
                work / "answers")
    (work / "output").mkdir()
    request = ExecutionRequest(
        run_id="bench-root", image=image, submission_dir=submission, bundle_dir=work / "bundle",
        output_dir=work / "output", time_limit_s=600, cpus=1, memory_mb=2048,
        log_cap_bytes=4 << 20, answers_dir=work / "answers", name=f"bench-root-{tag}-{base.name}")
    began = time.monotonic()
    result = make_docker_executor(client, shared_task_root=shared)(request, threading.Event())
    elapsed = time.monotonic() - began
    report = read_report(work / "answers")
    tasks = [json.loads(line.split(" ", 1)[1]) for line in result.stderr.splitlines()
             if line.startswith("TASKROOT ")]
    test = next(s for s in result.stages if s.stage == "meta-test")
    return {"shared": shared, "ok": bool(report and report.ok), "whole_s": round(elapsed, 2),
            "meta_test_wall_s": test.wall_s, "meta_test_cpu_s": test.cpu_s,
            "meta_test_peak_mb": test.peak_memory_mb,
            "startup_s": report.startup_s if report else None,
            "isolation": report.isolation if report else result.stderr[-500:], "tasks": tasks}


def readings(runs: list[dict]) -> tuple[list[float], list[float]]:
    """Bits read right of the slots written earlier: across tasks (same run), across runs
    (a run's first task, of slots written by earlier shared runs)."""
    across_tasks, across_runs, written_by_shared = [], [], set()
    for run in runs:
        for i, task in enumerate(run["tasks"]):
            earlier = {t["slot"] for t in run["tasks"][:i]}
            for folder in FOLDERS:
                across_tasks += [task["read"][folder][s] for s in sorted(earlier)]
                if i == 0 and run["shared"]:
                    across_runs += [task["read"][folder][s] for s in sorted(written_by_shared)]
        if run["shared"]:
            written_by_shared |= {t["slot"] for t in run["tasks"]}
    return across_tasks, across_runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--image", default="metadl-arena/sandbox:cpu")
    parser.add_argument("--trivial", action="store_true")
    args = parser.parse_args()
    client, tag = docker.from_env(), uuid.uuid4().hex[:12]
    with tempfile.TemporaryDirectory(prefix="bench-root-") as scratch:
        collection = generate_collection(Path(scratch) / "tiny", n_classes=6, n_images=25)
        runs = []
        for round_ in range(args.rounds):
            for shared in ((True, False) if round_ % 2 == 0 else (False, True)):
                load = os.getloadavg()[0]
                run = one_run(client, args.image, shared, tag, collection,
                              Path(scratch) / "cache", Path(scratch),
                              TRIVIAL if args.trivial else MODEL)
                run["load"] = round(load, 1)
                runs.append(run)
                print(json.dumps({k: v for k, v in run.items() if k != "tasks"}), flush=True)
    for shared in (True, False):
        mine = [r for r in runs if r["shared"] is shared]
        print(f"shared={shared}: " + ", ".join(
            f"{key} median {statistics.median(r[key] for r in mine):.2f}"
            for key in ("whole_s", "meta_test_wall_s", "meta_test_cpu_s", "meta_test_peak_mb",
                        "startup_s")))
    across_tasks, across_runs = readings(runs)
    for name, values in (("across tasks", across_tasks), ("across runs", across_runs)):
        if values:
            print(f"{name}: {len(values)} readings, {min(values):.3f}-{max(values):.3f}, "
                  f"mean {statistics.mean(values):.3f}")
    return 0 if all(r["ok"] for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
