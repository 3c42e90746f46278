"""The unchanged NeurIPS'22 protonet (`baselines/protonet` of the reference kit, meta-trained as
its `meta_fit` does) run by the reference kit and by `arena run`, on one generated collection,
side by side (issue 38): whole wall, meta-test wall, and the peak memory of each whole process
tree (the sum of every descendant's PSS, sampled every 0.25 s, so shared pages such as torch's
libraries count once) with the number of processes that map libtorch.

The kit is not vendored: give its checkout (github:DustinCarrion/cd-metadl) and a Python that
has torch, torchvision and the kit's requirements (pandas, scipy, scikit-learn, matplotlib,
seaborn, pyyaml, absl-py); the same Python runs `arena run` with this tree on PYTHONPATH.

    python3 -m venv /work/tv && /work/tv/bin/pip install torch==2.14.1 torchvision==0.29.1 \
        pandas scipy scikit-learn matplotlib seaborn pyyaml absl-py pillow typer rich httpx jinja2
    .venv/bin/python benchmarks/bench_reference_kit.py --kit /work/ref/cd-metadl \
        --python /work/tv/bin/python --tasks-per-dataset 5 [--rounds 1] [--out /tmp/refkit]

The collection is the starting kit's generated one with five meta-train domains (the kit's
protonet asks for 3 validation datasets, which leaves it none to train on with three), the
same folder for both. Each side's test tasks are drawn by its own sampler from the same
any-way any-shot distribution (N 2-20, k 1-20, 20 queries a class), so meta-test is also given
per test image. Rounds alternate kit and arena.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPLITS = {"meta-train": ["stripes", "blobs", "glyphs", "scripts", "spurious"],
          "meta-test": ["spectra", "mosaic"]}


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _tree(root: int) -> list[int]:
    seen, todo = [], [root]
    while todo:
        pid = todo.pop()
        seen.append(pid)
        todo += _children(pid)
    return seen


def _pss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _maps_torch(pid: int) -> bool:
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


class TreeSampler(threading.Thread):
    """Peak of the summed PSS of `root`'s process tree, and the most processes mapping
    libtorch at once, until `stop()`."""

    def __init__(self, root: int, period_s: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.root, self.period_s = root, period_s
        self.peak_kib = self.torch_processes = self.most_processes = 0
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.is_set():
            pids = _tree(self.root)
            self.peak_kib = max(self.peak_kib, sum(_pss_kib(p) for p in pids))
            self.most_processes = max(self.most_processes, len(pids))
            self.torch_processes = max(self.torch_processes, sum(map(_maps_torch, pids)))
            self._stop.wait(self.period_s)

    def stop(self) -> dict:
        self._stop.set()
        self.join()
        return {"peak_pss_mib": round(self.peak_kib / 1024, 1),
                "torch_processes": self.torch_processes, "processes": self.most_processes}


def make_collection(folder: Path, python: str) -> Path:
    data = folder / "data"
    if not (data / "info" / "meta_splits.txt").exists():
        subprocess.run([python, "-m", "starting_kit.cli", "data", "generate", str(data)],
                       check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                       stdout=subprocess.DEVNULL)
        (data / "info" / "meta_splits.txt").write_text(json.dumps(SPLITS))
    return data


def measured(command: list[str], cwd: Path, env: dict, log: Path) -> dict:
    started = time.perf_counter()
    with log.open("w") as out:
        process = subprocess.Popen(command, cwd=cwd, env=env, stdout=out,
                                   stderr=subprocess.STDOUT)
        sampler = TreeSampler(process.pid)
        sampler.start()
        code = process.wait()
    return {"exit": code, "wall_s": round(time.perf_counter() - started, 1), **sampler.stop()}


def run_kit(kit: Path, python: str, data: Path, out: Path, tasks: int) -> dict:
    ingestion = out / "kit_ingestion"
    env = {**os.environ, "PATH": f"{Path(python).parent}:{os.environ['PATH']}"}
    result = measured([python, "-m", "cdmetadl.run", f"--input_data_dir={data}",
                       f"--submission_dir={kit / 'baselines' / 'protonet'}",
                       "--overwrite_previous_results=True", f"--test_tasks_per_dataset={tasks}",
                       f"--output_dir_ingestion={ingestion}",
                       f"--output_dir_scoring={out / 'kit_scoring'}"], kit, env,
                      out / "kit.log")
    meta = (ingestion / "metadata_ingestion").read_text()
    result["meta_test_s"] = float(re.search(r"Meta-test time: ([\d.]+)", meta).group(1))
    result["test_images"] = _kit_test_images(out / "kit.log")
    return result


def _kit_test_images(log: Path) -> int | None:
    """The kit logs no task sizes at meta-test; None (per image figures use arena's count)."""
    return None


def run_arena(kit: Path, python: str, data: Path, out: Path, tasks: int) -> dict:
    target = out / "arena_output"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = measured([python, "-m", "starting_kit.cli", "run",
                       str(kit / "baselines" / "protonet"), "--data", str(data),
                       "--tasks-per-dataset", str(tasks), "--output", str(target)], out, env,
                      out / "arena.log")
    text = (out / "arena.log").read_text()
    # the progress line's clock starts with the stage: the last test task's is meta-test's wall
    found = re.findall(r"test tasks: \d+ of \d+ \((\d+) s elapsed\)", text)
    result["meta_test_s"] = int(found[-1]) if found else None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kit", type=Path, required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--tasks-per-dataset", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("/tmp/arena-refkit"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = make_collection(args.out, args.python)
    rows = []
    for round_ in range(args.rounds):
        for side, runner in (("kit", run_kit), ("arena", run_arena)):
            folder = args.out / f"{side}-{round_}"
            folder.mkdir(exist_ok=True)
            row = {"side": side, "round": round_, "load": round(os.getloadavg()[0], 1),
                   **runner(args.kit, args.python, data, folder, args.tasks_per_dataset)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
