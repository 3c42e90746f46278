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
import shutil
import statistics
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

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
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            pids = _tree(self.root)
            self.peak_kib = max(self.peak_kib, sum(_pss_kib(p) for p in pids))
            self.most_processes = max(self.most_processes, len(pids))
            self.torch_processes = max(self.torch_processes, sum(map(_maps_torch, pids)))
            self._halt.wait(self.period_s)

    def stop(self) -> dict:
        self._halt.set()
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


WRAPPER = '''"""The kit's protonet (protonet_model.py, unchanged), its `should_train` off."""
from protonet_model import MyLearner, MyPredictor  # noqa: F401
from protonet_model import MyMetaLearner as _Protonet


class MyMetaLearner(_Protonet):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.should_train = False
'''


def untrained_protonet(protonet: Path, folder: Path) -> Path:
    """A copy of the protonet whose `meta_fit` returns its initial weights at once (its own
    `should_train` flag off): meta-test's work does not depend on the weights' values, so both
    sides' meta-test costs what the meta-trained protonet's does, and three interleaved rounds
    fit where one meta-training takes 40-60 minutes on a loaded 2-core host."""
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(protonet, folder)
    (folder / "model.py").rename(folder / "protonet_model.py")
    (folder / "model.py").write_text(WRAPPER)
    return folder


def run_kit(kit: Path, submission: Path, python: str, data: Path, out: Path,
            tasks: int) -> dict:
    ingestion = out / "kit_ingestion"
    env = {**os.environ, "PATH": f"{Path(python).parent}:{os.environ['PATH']}"}
    result = measured([python, "-m", "cdmetadl.run", f"--input_data_dir={data}",
                       f"--submission_dir={submission}",
                       "--overwrite_previous_results=True", f"--test_tasks_per_dataset={tasks}",
                       f"--output_dir_ingestion={ingestion}",
                       f"--output_dir_scoring={out / 'kit_scoring'}"], kit, env,
                      out / "kit.log")
    meta = (ingestion / "metadata_ingestion").read_text()
    for stage, line in (("meta_test_s", "Meta-test time"), ("meta_train_s", "Meta-train time")):
        found = re.search(line + r": ([\d.]+)", meta)
        result[stage] = float(found.group(1)) if found else None
    predictions = list(ingestion.glob("**/task_*.predict"))
    result["tasks"] = len(predictions)
    result["query_images"] = sum(len(p.read_text().splitlines()) for p in predictions)
    return result


def run_arena(kit: Path, submission: Path, python: str, data: Path, out: Path,
              tasks: int) -> dict:
    target = out / "arena_output"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = measured([python, "-m", "starting_kit.cli", "run",
                       str(submission), "--data", str(data),
                       "--tasks-per-dataset", str(tasks), "--output", str(target)], out, env,
                      out / "arena.log")
    text = (out / "arena.log").read_text()
    # the progress line's clock starts with the stage: the last test task's is meta-test's wall
    found = re.findall(r"test tasks: \d+ of \d+ \((\d+) s elapsed\)", text)
    result["meta_test_s"] = int(found[-1]) if found else None
    predictions = list((target / "predictions").glob("task_*.npy"))
    result["tasks"] = len(predictions)
    result["query_images"] = sum(len(np.load(p)) for p in predictions)
    return result


def summary(rows: list[dict]) -> dict:
    """Median arena/kit ratios over rounds (each round's pair ran back to back)."""
    ratios: dict[str, list[float]] = {}
    for round_ in sorted({r["round"] for r in rows}):
        pair = {r["side"]: r for r in rows if r["round"] == round_}
        if set(pair) != {"kit", "arena"}:
            continue
        kit, arena = pair["kit"], pair["arena"]
        per = {"wall": "wall_s", "meta_test": "meta_test_s", "peak_pss": "peak_pss_mib"}
        for name, key in per.items():
            if kit.get(key) and arena.get(key):
                ratios.setdefault(name, []).append(arena[key] / kit[key])
        if kit.get("query_images") and arena.get("query_images") and arena.get("meta_test_s"):
            ratios.setdefault("meta_test_per_query_image", []).append(
                (arena["meta_test_s"] / arena["query_images"])
                / (kit["meta_test_s"] / kit["query_images"]))
    loads = [r[k] for r in rows for k in ("load", "load_end")]
    return {"rounds": len(ratios.get("wall", [])),
            "median_arena_over_kit": {k: round(statistics.median(v), 3)
                                      for k, v in ratios.items()},
            "each": {k: [round(x, 3) for x in v] for k, v in ratios.items()},
            "load_min_max": [min(loads), max(loads)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kit", type=Path, required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--tasks-per-dataset", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--skip-meta-train", action="store_true",
                        help="the protonet, its own `should_train` off (untrained_protonet)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/arena-refkit"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = make_collection(args.out, args.python)
    submission = args.kit / "baselines" / "protonet"
    if args.skip_meta_train:
        submission = untrained_protonet(submission, args.out / "protonet-untrained")
    rows = []
    for round_ in range(args.rounds):
        for side, runner in (("kit", run_kit), ("arena", run_arena)):
            folder = args.out / f"{side}-{round_}"
            folder.mkdir(exist_ok=True)
            row = {"side": side, "round": round_, "load": round(os.getloadavg()[0], 1),
                   **runner(args.kit, submission, args.python, data, folder,
                            args.tasks_per_dataset)}
            row["load_end"] = round(os.getloadavg()[0], 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
            (args.out / "results.json").write_text(json.dumps(rows, indent=2))
    print(json.dumps(summary(rows)), flush=True)


if __name__ == "__main__":
    main()
