"""What the worker's pre-fault costs a run (issue 34.5), side by side, medians of `--repeat`,
alternated so that the host's load hits each alike:

1. the image, in a container of it: doing nothing; reading every file; reading only the files
   cachestat does not find wholly cached (`runner/prefault.read_tree`'s default). All with the
   image already in the page cache (what a run pays when the host's reclaim counters moved).
   Inside the container cachestat is refused (Docker's libseccomp does not know its name, so
   even a profile naming it refuses it): the "cached" count says whether it answered.
2. the worker's own reads (the run's data, the platform's code): a warm tree read in full
   against the cachestat check, here on the sandbox code folder and on `--tree`.

Measured on the loaded 2-core host (04:40 UTC, 2026-12-05, medians of 3): the CPU image
(24,072 files, 0.94 GiB) in a container: doing nothing 0.64 s / 1.07 s, reading every file
4.29 s / 7.99 s, with the cachestat attempt 4.58 s / 7.76 s (load 28 / 17; cachestat refused
there, every file read: 1.07x / 0.97x, i.e. noise). Worker side, warm: the platform's code
(101 files) 11 ms read in full, 12 ms with cachestat; torch's package (14,273 files, 716 MiB)
2.31 s read in full, 1.60 s with cachestat (0.69x; the walk and the opens remain).

    .venv/bin/python benchmarks/bench_prefault.py [--repeat 3] [--image IMAGE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from worker.sandbox_config import (  # noqa: E402
    CODE_TARGET,
    SANDBOX_GID,
    SANDBOX_UID,
    default_code_dir,
)

READ_ALL = ("import sys; from submission_api.runner import prefault; "
            "prefault._cachestat_works[0] = False; sys.exit(prefault.main(['/']))")
COMMANDS = {"nothing": ["true"],
            "read every file": ["python3", "-c", READ_ALL],
            "cachestat, read the rest": ["python3", "-m", "submission_api.runner.prefault", "/"]}


def run(client, image: str, command: list[str]) -> tuple[float, dict]:  # noqa: ANN001
    from docker.types import Mount

    began = time.perf_counter()
    output = client.containers.run(
        image, command, user=f"{SANDBOX_UID}:{SANDBOX_GID}", network_mode="none",
        read_only=True, cap_drop=["ALL"], security_opt=["no-new-privileges:true"],
        environment={"PYTHONPATH": CODE_TARGET}, remove=True,
        mounts=[Mount(f"{CODE_TARGET}/submission_api", str(default_code_dir()), type="bind",
                      read_only=True)])
    seconds = time.perf_counter() - began
    lines = output.decode().strip().splitlines()
    return seconds, json.loads(lines[-1]) if lines else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--image", default="metadl-arena/sandbox:cpu")
    parser.add_argument("--tree", type=Path, default=None,
                        help="a folder for the worker-side reads (default: torch's package)")
    parser.add_argument("--skip-image", action="store_true")
    args = parser.parse_args()
    worker_side(args.tree, args.repeat)
    if not args.skip_image:
        image(args.image, args.repeat)


def worker_side(tree: Path | None, repeat: int) -> None:
    from submission_api.runner import prefault

    if tree is None:
        import torch

        tree = Path(torch.__file__).parent
    for root in (default_code_dir(), tree):
        prefault.read_tree([root])  # warm
        times: dict[str, list[float]] = {"read every file": [], "cachestat, read the rest": []}
        for _ in range(repeat):
            prefault._cachestat_works[0] = False
            times["read every file"].append(prefault.read_tree([root])["seconds"])
            prefault._cachestat_works[0] = True
            summary = prefault.read_tree([root])
            times["cachestat, read the rest"].append(summary["seconds"])
        base = statistics.median(times["read every file"])
        print(f"worker side, {root} ({summary['files']:.0f} files), load {_load()}")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"  {name:26s} {median:7.3f} s  ({median / max(base, 1e-9):.2f}x)")


def _load() -> str:
    with open("/proc/loadavg") as handle:
        return handle.read().split()[0]


def image(name: str, repeat: int) -> None:
    client = docker.from_env()
    args = argparse.Namespace(image=name, repeat=repeat)
    run(client, args.image, COMMANDS["read every file"][:])  # warm: the image in the cache
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    summary: dict[str, dict] = {}
    for _ in range(args.repeat):
        for name, command in COMMANDS.items():
            seconds, summary[name] = run(client, args.image, command)
            times[name].append(seconds)
    base = statistics.median(times["read every file"])
    print(f"image {args.image}, load {_load()}, median of {args.repeat}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:26s} {median:7.2f} s  ({median / base:.2f}x of reading every file)  "
              f"{summary[name]}")


if __name__ == "__main__":
    main()
