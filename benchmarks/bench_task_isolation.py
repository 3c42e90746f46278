"""What task isolation costs, side by side in one run (issue 11; docs/performance.md).

1. Per-task cost for a trivial submission: every task in its own forked process, released by the
   task server over a socket (`isolated`), against the same tasks cut and handed to the same
   learner in one shared process (`shared`, the pre-isolation loop). The difference is what
   isolation adds per task (fork, confinement, import of model.py, the socket, the sweep).
2. A whole `arena run` of that submission over `--run-tasks` tasks against merely decoding the
   same tasks' image files, the plainest loader there is (PIL decode, `np.asarray`, `np.stack`
   per support and query set: no conversion to float32, no resize, no tensors; issue 38 asked
   for this reference instead of bench_task_generation's naive loader, 1.5-2x slower).
3. Disk written and peak resident memory of a whole `arena run` at each of `--scales` task
   counts, each in a fresh process: RSS of the trusted side (VmHWM) and of the largest participant
   process, and the bytes written per run against the distinct images' uint8 size.

    .venv/bin/python benchmarks/bench_task_isolation.py [--tasks 200] [--rounds-per-task 3]
        [--busy N] [--run-tasks 300] [--naive-tasks 30] [--scales 100 1000 6000]
        [--per-task-only] [--compare-tree DIR [--compare-whole] [--rounds N]]

`--busy N` runs N busy Python loops beside every measurement (a loaded host, issue 38: ~20 on
2 cores); the load average is printed with each figure.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from bench_task_generation import source_files
from benchlib import read_memory_status, scratch_dir
from PIL import Image

from starting_kit.sample_data import generate_collection
from submission_api.data import images_to_tensor, load_collection
from submission_api.protocols import ProtocolParams
from submission_api.runner.bundle import TaskImages, read_task_plan
from submission_api.runner.heap import with_huge_pages
from submission_api.runner.local import run_local
from submission_api.runner.prepare import prepare_run
from submission_api.runner.stages import meta_test_command, run_meta_test

IMAGE_BYTES = 128 * 128 * 3
TRIVIAL = '''
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor

class MyPredictor(Predictor):
    def predict(self, query_set):
        return np.zeros(len(query_set), dtype=np.int64)

class MyLearner(Learner):
    def fit(self, support_set):
        return MyPredictor()
    def save(self, path):
        open(path + "/learner.txt", "w").write("trivial")
    def load(self, path):
        open(path + "/learner.txt").read()

class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
'''


def protocol(tasks: int) -> ProtocolParams:
    per_dataset = max(1, tasks // 2)  # the collection has two meta-test datasets
    return ProtocolParams.from_dict({"name": "cross-domain", "tasks_per_dataset": per_dataset})


def write_trivial(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(TRIVIAL)
    return folder


def prepared(root: Path, collection_dir: Path, cache: Path, tasks: int, name: str) -> Path:
    collection = load_collection(collection_dir, cache)
    out = root / f"prepared-{name}"
    prepare_run(collection, protocol(tasks), (0, 0), out / "bundle", out / "answers")
    (out / "learner").mkdir()
    (out / "learner" / "learner.txt").write_text("trivial")
    return out


def time_isolated(submission: Path, run: Path, tree: Path | None = None,
                  own_session: bool = False) -> float:
    """Seconds per task of the isolated path (the supervisor's start excluded); `tree`: the
    source tree whose meta-test side runs (another checkout, to compare designs).

    `own_session`: the meta-test side is launched in a session of its own, as `arena run`
    launches it (`runner/limited.py`; the platform's container runs apart from the worker);
    else in this benchmark's session. Where the kernel groups CPU time by session
    (`sched_autogroup_enabled`), a loaded host shares its cores between sessions first: with
    the flag the trusted side (this process: the cut, the shared loop's own work) no longer
    shares one session's CPU with the supervisor, the fork server and the reapers. No
    difference was measured at load 19-35 (docs/performance.md)."""
    scratch = run / "scratch"
    scratch.mkdir(exist_ok=True)
    env = with_huge_pages({  # as every launcher of the meta-test side sets it (runner/heap.py)
        **os.environ, "PYTHONPATH": str(tree or Path(__file__).resolve().parents[1]),
        "TMPDIR": str(scratch), "HOME": str(scratch)})

    def launch(control: Path) -> int:
        command = meta_test_command(sys.executable, str(control), str(submission),
                                    str(run / "learner"), [str(scratch)], 0, 1)
        return subprocess.run(command, env=env, check=False,
                              start_new_session=own_session).returncode

    code, report = run_meta_test(run / "answers", run / "channel", 3600.0, launch)
    assert code == 0 and report.ok, report
    # The report's clock starts before the supervisor connects: its start-up (the fork
    # server's preload, ~2 s) is left out where the report states it (an older tree's does not).
    return (report.seconds - getattr(report, "startup_s", 0.0)) / report.n_tasks


def time_shared(submission: Path, run: Path) -> float:
    """Seconds per task with every task in this one process (cut, convert, load, fit, predict)."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("trivial_model", submission / "model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plan = read_task_plan(run / "answers")
    images = TaskImages(plan)
    started = time.perf_counter()
    for task in plan.tasks:
        support, labels, query = images.cut(task)
        learner = module.MyLearner()
        learner.load(str(run / "learner"))
        y = torch.from_numpy(np.array(labels))
        learner.fit((images_to_tensor(support), y, y, task.n_ways, task.n_shots)).predict(
            images_to_tensor(query))
    images.close()
    return (time.perf_counter() - started) / len(plan.tasks)


def time_plain_decode(collection_dir: Path, cache: Path, run: Path, tasks: int) -> float:
    """Seconds per task to decode the image files of the first `tasks` tasks, the plainest way:
    each file decoded by PIL into a uint8 array, stacked per support and query set."""
    collection = load_collection(collection_dir, cache)
    files = {name: source_files(collection_dir, ds) for name, ds in collection.datasets.items()}
    plan = read_task_plan(run / "answers")
    started = time.perf_counter()
    for task in plan.tasks[:tasks]:
        names = files[task.dataset]
        for window in ("support_index", "query_index"):
            np.stack([np.asarray(Image.open(names[i])) for i in plan.window(window, task)])
    return (time.perf_counter() - started) / min(tasks, len(plan.tasks))


@contextlib.contextmanager
def busy_loops(count: int) -> Iterator[None]:
    """`count` processes spinning on the CPU while the block runs (a loaded host)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def written_bytes(*folders: Path) -> int:
    """Bytes of files a run wrote: hard links into the compiled cache cost nothing new."""
    total = 0
    for folder in folders:
        for path in folder.rglob("*"):
            info = path.lstat()
            if path.is_file() and not path.is_symlink() and info.st_nlink == 1:
                total += info.st_blocks * 512
    return total


def scale_child(collection_dir: str, cache: str, out: str, tasks: int) -> None:
    """One whole `arena run` in this process; prints its memory and disk figures as JSON."""
    before = read_memory_status()
    root = Path(out)
    submission = write_trivial(root / "trivial")
    result = run_local(submission, Path(collection_dir), root / "out", protocol=protocol(tasks),
                       cache_dir=Path(cache), keep_work=True)
    assert result.state == "finished" and result.scores is not None, result.message
    plan = read_task_plan(root / "out" / ".work" / "answers")
    distinct = {(t.dataset, int(i)) for t in plan.tasks
                for name in ("support_index", "query_index") for i in plan.window(name, t)}
    after = read_memory_status()
    print(json.dumps({
        "tasks": len(plan.tasks), "distinct_images": len(distinct),
        "distinct_mib": len(distinct) * IMAGE_BYTES / 2**20,
        "written_mib": written_bytes(root / "out") / 2**20,
        "trusted_hwm_growth_mib": after["VmHWM"] - before["VmRSS"],
        "largest_participant_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        "seconds": result.scores["duration_s"]}))


COMPARE_CHILD = """
import json, subprocess, sys
from pathlib import Path
import bench_task_isolation as bench
submission, run = Path(sys.argv[1]), Path(sys.argv[2])
# Both trees launch the meta-test side the same way (an older benchmark did not say how).
launched = subprocess.run
def run_in_session(*args, **kwargs):
    return launched(*args, **{**kwargs, "start_new_session": sys.argv[3] == "own"})
subprocess.run = run_in_session
reports = []
measured = bench.run_meta_test
def recorded(*args, **kwargs):
    code, report = measured(*args, **kwargs)
    reports.append(report)
    return code, report
bench.run_meta_test = recorded
bench.time_isolated(submission, run)
# Start-up (the fork server's preload) left out where the report states it; included on both
# sides otherwise, as a tree that does not state it measures it.
isolated = reports[0].seconds / reports[0].n_tasks
if hasattr(reports[0], "startup_s"):
    isolated = (reports[0].seconds - reports[0].startup_s) / reports[0].n_tasks
print(json.dumps({"isolated": isolated, "shared": bench.time_shared(submission, run)}))
"""


WHOLE_CHILD = """
import json, resource, sys, time
from pathlib import Path
import bench_task_isolation as bench
submission, collection, cache, plan, out = (Path(a) for a in sys.argv[1:6])
tasks, naive = int(sys.argv[6]), int(sys.argv[7])
cpu = lambda who: sum(getattr(resource.getrusage(who), f) for f in ("ru_utime", "ru_stime"))
decoding = time.process_time()
before = bench.time_plain_decode(collection, cache, plan, naive)
decoding = time.process_time() - decoding
own, children = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
started = time.perf_counter()
result = bench.run_local(submission, collection, out, protocol=bench.protocol(tasks),
                         cache_dir=cache)
whole = time.perf_counter() - started
assert result.state == "finished", result.message
used = cpu(resource.RUSAGE_SELF) - own + cpu(resource.RUSAGE_CHILDREN) - children
decoded = time.process_time()
after = bench.time_plain_decode(collection, cache, plan, naive)
decoding += time.process_time() - decoded
print(json.dumps({"whole": whole, "cpu": used, "plain": (before + after) / 2 * tasks,
                  "plain_cpu": decoding / 2 / naive * tasks}))
"""


def compare_whole(submission: Path, root: Path, collection_dir: Path, cache: Path, tasks: int,
                  naive: int, other: Path, rounds: int) -> None:
    """A whole `arena run` of `tasks` tasks with this tree and with `other` (a whole checkout),
    alternating, each against the plain decode of the same tasks' files timed just before and
    after it in the same child (the host's load drifts); CPU is that of the child and every
    process it waited for (the trusted side, meta-train, meta-test and the tasks), against the
    decode's own (steadier than wall clock on a loaded host)."""
    plan = prepared(root, collection_dir, cache, tasks, "whole-compare")
    here = Path(__file__).resolve().parents[1]
    for round_ in range(rounds):
        for name, tree in (("other", other.resolve()), ("this", here)):
            env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'benchmarks'}"}
            load = os.getloadavg()[0]
            done = subprocess.run([sys.executable, "-c", WHOLE_CHILD, str(submission),
                                   str(collection_dir), str(cache), str(plan),
                                   str(root / f"whole-{name}"), str(tasks), str(naive)],
                                  env=env, capture_output=True, text=True, check=False, cwd=tree)
            if done.returncode:
                raise SystemExit(f"the {name} tree failed:\n{done.stderr[-4000:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            plain_cpu = figures.get("plain_cpu", float("nan"))  # (an older child's: none)
            print(f"round {round_}, {name} tree: arena run of {tasks} tasks {figures['whole']:.1f} "
                  f"s ({figures['cpu']:.1f} s CPU), plain decode {figures['plain']:.1f} s "
                  f"({plain_cpu:.1f} s CPU): {figures['plain'] / figures['whole']:.2f}x wall, "
                  f"{plain_cpu / figures['cpu']:.2f}x CPU; load {load:.1f} -> "
                  f"{os.getloadavg()[0]:.1f}", flush=True)


def compare(submission: Path, root: Path, collection_dir: Path, cache: Path, tasks: int,
            other: Path, rounds: int, own_session: bool = False) -> None:
    """Per-task cost of this tree's meta-test (task server and participant side) and `other`'s
    (a whole checkout: its benchmarks/ too), alternating on one task plan, each as a ratio to
    the shared loop measured right after it (the host's load drifts), the supervisor's start-up
    left out of both where their reports state it. Each tree runs whole in a child process of
    its own, and launches its meta-test side as `own_session` says."""
    run = prepared(root, collection_dir, cache, tasks, "compare")
    here = Path(__file__).resolve().parents[1]
    for round_ in range(rounds):
        for name, tree in (("other", other.resolve()), ("this", here)):
            env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'benchmarks'}"}
            done = subprocess.run([sys.executable, "-c", COMPARE_CHILD, str(submission),
                                   str(run), "own" if own_session else "same"], env=env,
                                  capture_output=True, text=True, check=False, cwd=tree)
            if done.returncode:
                raise SystemExit(f"the {name} tree failed:\n{done.stderr[-4000:]}")
            figures = json.loads(done.stdout.strip().splitlines()[-1])
            isolated, shared = figures["isolated"], figures["shared"]
            print(f"round {round_}, {name} tree: isolated {isolated * 1000:.0f} ms per task, "
                  f"shared {shared * 1000:.0f} ms ({isolated / shared:.2f}x), load "
                  f"{os.getloadavg()[0]:.1f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--rounds-per-task", type=int, default=3)
    parser.add_argument("--busy", type=int, default=0, help="busy loops beside the figures")
    parser.add_argument("--run-tasks", type=int, default=300)
    parser.add_argument("--naive-tasks", type=int, default=30)
    parser.add_argument("--scales", type=int, nargs="*", default=[100, 1000, 6000])
    parser.add_argument("--compare-tree", type=Path, help="another checkout (e.g. `git archive "
                        "08e9140 submission_api | tar -x -C DIR`): its meta-test side is timed "
                        "on the same tasks, alternating with this one's, --rounds times")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compare-whole", action="store_true",
                        help="with --compare-tree: alternate whole `arena run`s of --run-tasks "
                             "tasks, each against the plain decode, instead of per-task rounds")
    parser.add_argument("--own-session", action="store_true",
                        help="launch the meta-test side in a session of its own, as `arena "
                             "run` does (by default, in this benchmark's session)")
    parser.add_argument("--per-task-only", action="store_true",
                        help="stop after the per-task rounds (no whole run, no scales)")
    parser.add_argument("--scale-child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scale_child:
        collection_dir, cache, out, tasks = args.scale_child
        scale_child(collection_dir, cache, out, int(tasks))
        return
    scratch = scratch_dir("task-isolation")
    root = Path(scratch.name)
    collection_dir, cache = root / "collection", root / "cache"
    if not collection_dir.exists():
        generate_collection(collection_dir, n_classes=20, n_images=40)
    submission = write_trivial(root / "trivial")

    if args.compare_tree and args.compare_whole:
        compare_whole(submission, root, collection_dir, cache, args.run_tasks, args.naive_tasks,
                      args.compare_tree, args.rounds)
        return
    if args.compare_tree:
        compare(submission, root, collection_dir, cache, args.tasks, args.compare_tree,
                args.rounds, args.own_session)
        return
    run = prepared(root, collection_dir, cache, args.tasks, "per-task")
    with busy_loops(args.busy):
        for round_ in range(args.rounds_per_task):  # interleaved: the host's load drifts
            isolated = time_isolated(submission, run, own_session=args.own_session)
            shared = time_shared(submission, run)
            print(f"per task, {args.tasks} tasks, round {round_}: isolated "
                  f"{isolated * 1000:.1f} ms, shared process {shared * 1000:.1f} ms, isolation "
                  f"adds {(isolated - shared) * 1000:.1f} ms ({isolated / shared:.2f}x); load "
                  f"{os.getloadavg()[0]:.1f}", flush=True)
        if args.per_task_only:
            return

        run_plan = prepared(root, collection_dir, cache, args.run_tasks, "whole")
        before = time_plain_decode(collection_dir, cache, run_plan, args.naive_tasks)
        started = time.perf_counter()
        result = run_local(submission, collection_dir, root / "whole",
                           protocol=protocol(args.run_tasks), cache_dir=cache)
        whole = time.perf_counter() - started
        assert result.state == "finished", result.message
        after = time_plain_decode(collection_dir, cache, run_plan, args.naive_tasks)
    plain = (before + after) / 2 * args.run_tasks
    print(f"arena run of {args.run_tasks} tasks: {whole:.1f} s; plain decode of the same tasks' "
          f"image files: {plain:.1f} s (from {args.naive_tasks} tasks, before and after the run: "
          f"{before * 1000:.0f} and {after * 1000:.0f} ms a task); ratio {plain / whole:.1f}x; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)

    for tasks in args.scales:
        out = root / f"scale-{tasks}"
        done = subprocess.run([sys.executable, __file__, "--scale-child", str(collection_dir),
                               str(cache), str(out), str(tasks)], capture_output=True, text=True,
                              check=True)
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"{figures['tasks']:>5} tasks: written {figures['written_mib']:.1f} MiB for "
              f"{figures['distinct_mib']:.1f} MiB of distinct images "
              f"({figures['written_mib'] / figures['distinct_mib']:.2f}x); trusted side "
              f"+{figures['trusted_hwm_growth_mib']:.0f} MiB peak; largest participant process "
              f"{figures['largest_participant_mib']:.0f} MiB; {figures['seconds']:.0f} s")


if __name__ == "__main__":
    main()
