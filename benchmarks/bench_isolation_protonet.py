"""What task isolation costs a real learner (issue 19; docs/performance.md): the NeurIPS'22
prototypical network on torchvision's ResNet-18 (`examples/neurips22/resnet18_protonet`,
unchanged: `Learner.load` of a 45 MB state in every task), over `--tasks` test tasks in the
`metadl-arena/sandbox:torchvision` image.

- `isolated`: the meta-test stage as the worker runs it (`make_docker_executor`): the task
  server outside, the fork server, a fresh process with its own namespaces per task, the
  verified sweep. Meta-train runs first (two tasks) and writes the learner both sides load.
- `one process`: the same learner on the same task plan in one process of one container of the
  same image and limits, as the NeurIPS'22 kit's ingestion ran it: per task cut, `MyLearner()`,
  `load`, `fit`, `predict`; once with glibc's defaults (the kit's), once with the heap settings
  every isolated task gets (`submission_api/runner/heap.py`), which is what isolation itself
  costs.

Both run `--rounds` times, alternating; the figures are meta-test wall per task (the task
server's clock; the loop's own), and each container's CPU time and peak memory (cgroup v1
`cpuacct.usage`, `memory.max_usage_in_bytes`, read from the host while it runs; both include
the imports, the meta-test container also its supervisor and fork server).

    .venv/bin/python benchmarks/bench_isolation_protonet.py [--tasks 50] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import threading
import time
from pathlib import Path

from bench_task_isolation import protocol
from benchlib import scratch_dir

import docker
from starting_kit.sample_data import generate_collection
from submission_api.data import load_collection
from submission_api.runner.heap import with_huge_pages
from submission_api.runner.prepare import prepare_run
from submission_api.runner.task_server import read_report
from worker.pipeline.execute import ExecutionRequest, make_docker_executor
from worker.sandbox import SandboxLimits, SandboxSpec, run_sandbox

IMAGE = "metadl-arena/sandbox:torchvision"
SUBMISSION = Path(__file__).resolve().parents[1] / "examples" / "neurips22" / "resnet18_protonet"
CPUS, MEMORY_MB = 2, 6144

# The reference kit's loop, in one process: what isolation is measured against.
ONE_PROCESS = r'''
import json, sys, time
begun = time.perf_counter()  # imports included, as the task server's clock includes them
from pathlib import Path
import numpy as np
import torch
from submission_api.data import images_to_tensor
from submission_api.runner.bundle import TaskImages, read_task_plan
from submission_api.runner.participant import import_submission
from submission_api.runner.task_process import seed_task, to_prediction_array

answers, learner_dir, threads = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
if sys.argv[4:] == ["tuned"]:
    from submission_api.runner.heap import keep_freed_memory
    assert keep_freed_memory()
torch.set_num_threads(threads)
_, my_learner = import_submission(Path("/submission"))
plan = read_task_plan(answers)
images = TaskImages(plan)
for task_id, task in enumerate(plan.tasks):
    seed_task(0, task_id)
    support, labels, query = images.cut(task)
    learner = my_learner()
    learner.load(learner_dir)
    y = torch.from_numpy(np.array(labels, dtype=np.int64))
    predictor = learner.fit((images_to_tensor(support), y, y.clone(), task.n_ways, task.n_shots))
    to_prediction_array(predictor.predict(images_to_tensor(query)), len(query), task.n_ways)
print(json.dumps({"seconds": time.perf_counter() - begun, "tasks": len(plan.tasks)}))
'''


class ContainerUsage:
    """Peak memory (`memory.max_usage_in_bytes`) and CPU time (`cpuacct.usage`) of the
    containers whose name starts with `prefix`, polled from the host's cgroup v1 tree (a
    container's cgroup goes when it exits: the last reading stands). CPU time is the figure
    that the host's other load disturbs least."""

    def __init__(self, client: docker.DockerClient, prefix: str) -> None:
        self.client, self.prefix = client, prefix
        self.peak, self.cpu_ns = 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self._stop.wait(0.1):
            for container in self.client.containers.list(filters={"name": self.prefix}):
                root = Path("/sys/fs/cgroup")
                try:
                    self.peak = max(self.peak, int((
                        root / "memory/docker" / container.id / "memory.max_usage_in_bytes"
                    ).read_text()))
                    self.cpu_ns = max(self.cpu_ns, int((
                        root / "cpuacct/docker" / container.id / "cpuacct.usage").read_text()))
                except (OSError, ValueError):
                    continue  # gone, or a cgroup v2 host: no figure

    def __enter__(self) -> ContainerUsage:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


def isolated(client: docker.DockerClient, root: Path, collection_dir: Path, cache: Path,
             tasks: int, round_: int) -> tuple[float, ContainerUsage, Path, Path]:
    """Meta-test seconds per task, the meta-test container's usage, the learner folder and
    the answers folder (the task plan) of one whole run as the worker makes it."""
    work = root / f"isolated-{round_}"
    prepare_run(load_collection(collection_dir, cache), protocol(tasks), (0, 0),
                work / "bundle", work / "answers")
    (work / "output").mkdir()
    name = f"arena-bench-protonet-{os.getpid()}-{round_}"
    request = ExecutionRequest(
        run_id=round_, image=IMAGE, submission_dir=SUBMISSION, bundle_dir=work / "bundle",
        output_dir=work / "output", time_limit_s=3600, cpus=CPUS, memory_mb=MEMORY_MB,
        answers_dir=work / "answers", name=name)
    with ContainerUsage(client, f"{name}-meta-test") as usage:
        result = make_docker_executor(client)(request, threading.Event())
    assert result.ok, result.stderr[-4000:]
    report = read_report(work / "answers")
    assert report is not None and report.ok, report
    return report.seconds / report.n_tasks, usage, request.learner_dir, work / "answers"


def one_process(client: docker.DockerClient, root: Path, learner: Path, answers: Path,
                cache: Path, round_: int, tuned: bool) -> tuple[float, ContainerUsage]:
    """Seconds per task and the container's usage for the same tasks in one process; `tuned`:
    with the heap settings each isolated task gets (`runner/heap.py`), else glibc's defaults
    as the reference kit has them."""
    variant = "tuned" if tuned else "plain"
    submission = root / f"submission-{round_}-{variant}"
    shutil.copytree(SUBMISSION, submission)
    (submission / "bench_loop.py").write_text(ONE_PROCESS)
    name = f"arena-bench-protonet-one-{os.getpid()}-{round_}-{variant}"
    env = {"OMP_NUM_THREADS": str(CPUS), "MKL_NUM_THREADS": str(CPUS)}
    spec = SandboxSpec(
        image=IMAGE, command=("python3", "/submission/bench_loop.py", str(answers), "/learner",
                              str(CPUS), *(("tuned",) if tuned else ())),
        submission_dir=submission, bundle_dir=None, output_dir=root / f"one-out-{round_}",
        name=name, read_only_mounts=((learner, "/learner"), (answers, str(answers)),
                                     (cache, str(cache))),
        env=with_huge_pages(env) if tuned else env)
    with ContainerUsage(client, name) as usage:
        result = run_sandbox(client, spec, SandboxLimits(cpus=CPUS, memory_mb=MEMORY_MB,
                                                         wall_time_s=3600.0))
    assert result.exit_code == 0, result.stderr[-4000:]
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    return figures["seconds"] / figures["tasks"], usage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    client = docker.from_env()
    client.images.get(IMAGE)  # bash scripts/build_sandbox_image.sh torchvision
    scratch = scratch_dir("isolation-protonet")
    root = Path(scratch.name)
    collection_dir, cache = root / "collection", root / "cache"
    generate_collection(collection_dir, n_classes=20, n_images=40)
    for round_ in range(args.rounds):
        started = time.perf_counter()
        apart, apart_use, learner, answers = isolated(client, root, collection_dir, cache,
                                                      args.tasks, round_)
        print(f"round {round_}, {args.tasks} tasks: isolated meta-test wall per task "
              f"{apart * 1000:.0f} ms, container CPU {apart_use.cpu_ns / 1e9:.1f} s, peak "
              f"memory {apart_use.peak / 2**20:.0f} MiB", flush=True)
        for tuned, label in ((False, "one process (reference kit: glibc defaults)"),
                             (True, "one process, the isolated tasks' heap settings")):
            shared, shared_use = one_process(client, root, learner, answers, cache, round_,
                                             tuned)
            cpu = apart_use.cpu_ns / max(1, shared_use.cpu_ns)
            print(f"  vs {label}: {shared * 1000:.0f} ms a task, isolated/this "
                  f"{apart / shared:.3f}x ({(apart - shared) * 1000:+.0f} ms a task); CPU "
                  f"{shared_use.cpu_ns / 1e9:.1f} s ({cpu:.3f}x, imports included); peak memory "
                  f"{shared_use.peak / 2**20:.0f} MiB", flush=True)
        print(f"  round took {time.perf_counter() - started:.0f} s, load "
              f"{os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
