"""What a test task's own namespaces and fresh tmpfs mounts cost in the Docker sandbox (issue 19).

1. Start-up alone, in one meta-test container (our seccomp profile; torch imported, as in the
   fork server): the fork server's double fork of an empty task, with `runner/namespaces.enter`
   (user, mount, IPC, network, PID namespaces, tmpfs on /tmp and /dev/shm) in the middle child
   against without, and binding the run's private tmpfs copy of a 16 MiB submission (made
   once, its time printed too; issue 34), alternating, `--forks` each.
2. The whole meta-test stage of a trivial submission over `--tasks` tasks, as the worker runs it
   (`make_docker_executor`), with the tasks' namespaces against Docker's default profile (shared
   namespaces, swept): the task server's meta-test seconds per task, side by side.

    .venv/bin/python benchmarks/bench_task_namespaces.py [--forks 200] [--tasks 40]
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from pathlib import Path

from bench_task_isolation import protocol, write_trivial
from benchlib import scratch_dir

import docker
from starting_kit.sample_data import generate_collection
from submission_api.data import load_collection
from submission_api.runner.prepare import prepare_run
from submission_api.runner.task_server import read_report
from worker.pipeline.execute import ExecutionRequest, make_docker_executor
from worker.sandbox import SandboxLimits, SandboxSpec, run_sandbox

IMAGE = "metadl-arena/sandbox:cpu"
WEIGHTS_BYTES = 16 << 20
FORKS = r'''
import json, os, sys, time
from pathlib import Path
import torch  # noqa: F401 - the fork server's size
from submission_api.runner import namespaces, private_copy

begun = time.perf_counter()
made = private_copy.make([Path("/submission")], Path("/dev/shm"))
copy_once = time.perf_counter() - begun

def start(private):
    begun = time.perf_counter()
    middle = os.fork()
    if middle == 0:
        if private:
            copies = [(Path("/submission"), made[0])] if private == "copy" else []
            world = namespaces.enter([Path("/tmp")], [Path("/submission")], copies)
            assert len(world.copied) == len(copies)
        task = os.fork()
        if task == 0:
            os._exit(0)
        os.waitpid(task, 0)
        os._exit(0)
    os.waitpid(middle, 0)
    return time.perf_counter() - begun

n = int(sys.argv[1])
times = {"copy": [], True: [], False: []}
for _ in range(n):
    for private in times:
        times[private].append(start(private))
print(json.dumps({**{str(k): sorted(v)[len(v) // 2] for k, v in times.items()},
                  "copy_once": copy_once}))
'''


def time_forks(client: docker.DockerClient, root: Path, forks: int) -> dict[str, float]:
    submission = root / "forks"
    submission.mkdir(exist_ok=True)
    (submission / "main.py").write_text(FORKS)
    # The run's private copy (issue 34): made once, then bound over /submission in each task.
    (submission / "weights.bin").write_bytes(os.urandom(WEIGHTS_BYTES))
    spec = SandboxSpec(image=IMAGE, command=("python3", "/submission/main.py", str(forks)),
                       submission_dir=submission, bundle_dir=None, output_dir=root / "out",
                       task_namespaces=True)
    result = run_sandbox(client, spec, SandboxLimits(memory_mb=2048, wall_time_s=600.0))
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def run_meta_test(client: docker.DockerClient, work: Path, collection_dir: Path, cache: Path,
                  tasks: int, submission: Path, task_namespaces: bool = True) -> Path:
    """`submission`'s meta-test stage on `tasks` tasks prepared in `work`, in the sandbox as
    the worker runs it (1 CPU, 2 GiB); returns the run's answers folder."""
    prepare_run(load_collection(collection_dir, cache), protocol(tasks), (0, 0),
                work / "bundle", work / "answers")
    (work / "output").mkdir()
    request = ExecutionRequest(
        run_id=f"bench-{work.name}", image=IMAGE, submission_dir=submission,
        bundle_dir=work / "bundle", output_dir=work / "output", time_limit_s=1200, cpus=1,
        memory_mb=2048, answers_dir=work / "answers",
        name=f"arena-bench-{work.name}".lower())
    make_docker_executor(client, task_namespaces=task_namespaces)(request, threading.Event())
    return work / "answers"


def time_meta_test(client: docker.DockerClient, root: Path, collection_dir: Path, cache: Path,
                   tasks: int, task_namespaces: bool) -> tuple[float, str]:
    """Meta-test seconds per task (the task server's clock) and the run's isolation line."""
    answers = run_meta_test(client, root / f"run-{task_namespaces}", collection_dir, cache,
                            tasks, write_trivial(root / "trivial"), task_namespaces)
    report = read_report(answers)
    assert report is not None and report.ok, report
    return report.seconds / tasks, report.isolation or ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--forks", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=40)
    args = parser.parse_args()
    client = docker.from_env()
    scratch = scratch_dir("task-namespaces")
    root = Path(scratch.name)

    forks = time_forks(client, root, args.forks)
    private, shared = forks["True"], forks["False"]
    added = (private - shared) * 1000
    print(f"start-up of an empty task (median of {args.forks}): with its namespaces and tmpfs "
          f"{private * 1000:.2f} ms, without {shared * 1000:.2f} ms: +{added:.2f} ms "
          f"({private / shared:.2f}x); binding the run's private copy of a "
          f"{WEIGHTS_BYTES >> 20} MiB submission {forks['copy'] * 1000:.2f} ms "
          f"({forks['copy'] / shared:.2f}x); the copy, once per run, "
          f"{forks['copy_once'] * 1000:.0f} ms")

    collection_dir, cache = root / "collection", root / "cache"
    generate_collection(collection_dir, n_classes=20, n_images=40)
    figures = {flag: time_meta_test(client, root, collection_dir, cache, args.tasks, flag)
               for flag in (True, False)}
    (own, own_line), (swept, swept_line) = figures[True], figures[False]
    print(f"meta-test of a trivial submission, {args.tasks} tasks: own namespaces "
          f"{own * 1000:.0f} ms per task, shared and swept {swept * 1000:.0f} ms per task: "
          f"{(own - swept) * 1000:+.0f} ms ({own / swept:.2f}x)\n  own: {own_line}\n"
          f"  shared: {swept_line}")


if __name__ == "__main__":
    main()
