"""Peak memory of preparing a run's bundle as the dataset grows: it should stay flat.

For each dataset size (images per class) a fresh collection is generated and compiled, then a
child process per (size, writer) opens it, notes its resident set, runs the preparation and
reports the growth of its resident high-water mark (VmHWM from /proc/self/status, the same
figure as `resource.getrusage(...).ru_maxrss`) and the bundle size. A child per measurement,
because a high-water mark never goes down. The previous memory-mapped writer runs beside the
current one for a before/after.

    .venv/bin/python benchmarks/bench_prepare_memory.py [--sizes 40 160] [--tasks 40]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench_prepare import SEED, write_meta_test_memmap
from benchlib import read_memory_status, scratch_dir

from starting_kit.sample_data import generate_collection
from submission_api.data import load_collection
from submission_api.protocols import ProtocolParams, plan_test_episodes
from submission_api.runner.prepare import prepare_run

WRITERS = ("prepare_run", "previous writer (memory-mapped output)")


def mapped(status: dict[str, float]) -> float:
    """Resident pages mapped from files (RssFile) or from a memory file system (RssShmem)."""
    return status.get("RssFile", 0.0) + status.get("RssShmem", 0.0)


def measure_child(collection_dir: Path, cache_dir: Path, out_dir: Path, tasks: int,
                  writer: str) -> dict:
    """Run one preparation in this process; its memory figures in MiB."""
    collection = load_collection(collection_dir, cache_dir)
    protocol = ProtocolParams(tasks_per_dataset=tasks)
    episodes = plan_test_episodes(protocol, collection, SEED[0])  # small; planned before either
    before = read_memory_status()
    if writer == WRITERS[0]:
        prepare_run(collection, protocol, SEED, out_dir / "bundle", out_dir / "answers")
    else:
        write_meta_test_memmap(episodes, collection.datasets, out_dir / "bundle",
                               out_dir / "answers")
    after = read_memory_status()
    bundle = sum(p.stat().st_size for p in (out_dir / "bundle" / "meta_test").iterdir())
    dataset = sum(p.stat().st_size for p in cache_dir.rglob("images.u8"))
    return {"peak_growth": after["VmHWM"] - before["VmRSS"], "before": before["VmRSS"],
            "mapped_growth": mapped(after) - mapped(before),
            "bundle": bundle / 2**20, "datasets": dataset / 2**20}


def run_child(collection_dir: Path, cache_dir: Path, out_dir: Path, tasks: int,
              writer: str) -> dict:
    """`measure_child` in a fresh interpreter (its own high-water mark)."""
    command = [sys.executable, __file__, "--child", str(collection_dir), str(cache_dir),
               str(out_dir), str(tasks), writer]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        col, cache, out, tasks, writer = sys.argv[2:7]
        print(json.dumps(measure_child(Path(col), Path(cache), Path(out), int(tasks), writer)))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[40, 160],
                        help="images per class of the test dataset (20 classes)")
    parser.add_argument("--tasks", type=int, default=40, help="test tasks per run")
    args = parser.parse_args()
    print(f"cross-domain, {args.tasks} test tasks; MiB; peak growth = VmHWM after preparation "
          "- VmRSS before it; mapped, left = file pages still mapped after it")
    print(f"  {'writer':<40} {'img/class':>9} {'dataset':>8} {'bundle':>7} {'peak growth':>12} "
          f"{'mapped, left':>13}")
    with scratch_dir("arena-bench-memory-") as tmp:
        for size in args.sizes:
            base = Path(tmp) / f"size{size}"
            col = generate_collection(base / "col", seed=0, n_images=size,
                                      domains=("stripes", "spectra"))
            load_collection(col, base / "cache")  # compile once, outside the measurement
            for n, writer in enumerate(WRITERS):
                m = run_child(col, base / "cache", base / f"out{n}", args.tasks, writer)
                print(f"  {writer:<40} {size:>9} {m['datasets']:>8.0f} {m['bundle']:>7.0f} "
                      f"{m['peak_growth']:>12.0f} {m['mapped_growth']:>13.0f}", flush=True)


if __name__ == "__main__":
    main()
