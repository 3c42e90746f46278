"""What keeping the page cache constant costs a run (issue 34), side by side.

1. The worker's pre-fault of the sandbox image (`worker/prefault.py`: a container of the image
   reads every file) against a container of the image that does nothing: the per-run cost, once
   cached and, after a DONTNEED eviction of the image's files, cold.
2. The run's private tmpfs copy of the submission and the learner (`runner/private_copy.py`),
   once per run, for a few sizes, against reading the same files in place once.

    .venv/bin/python benchmarks/bench_page_cache.py [--repeat 3] [--image IMAGE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from submission_api.runner import private_copy  # noqa: E402
from submission_api.runner.prefault import read_tree  # noqa: E402
from worker.prefault import prefault_image  # noqa: E402


def seconds(action) -> float:  # noqa: ANN001 - any callable
    begun = time.perf_counter()
    action()
    return time.perf_counter() - begun


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--image", default="metadl-arena/sandbox:cpu")
    args = parser.parse_args()
    client = docker.from_env()
    empty = [seconds(lambda: client.containers.run(args.image, ["true"], remove=True,
                                                   network_mode="none"))
             for _ in range(args.repeat)]
    warm = [seconds(lambda: prefault_image(client, args.image)) for _ in range(args.repeat)]
    summary = prefault_image(client, args.image)
    print(f"image {args.image}: {summary['files']} files, {summary['bytes'] / 2**30:.2f} GiB; "
          f"a container doing nothing {statistics.median(empty):.2f} s, pre-faulting it "
          f"{statistics.median(warm):.2f} s (median of {args.repeat}; "
          f"{statistics.median(warm) / statistics.median(empty):.1f}x)")
    with tempfile.TemporaryDirectory(dir="/dev/shm") as space, \
            tempfile.TemporaryDirectory() as disk:
        for mib in (16, 128):
            folder = Path(disk, f"learner-{mib}")
            folder.mkdir()
            (folder / "weights.bin").write_bytes(os.urandom(mib << 20))
            in_place = seconds(lambda: read_tree([folder]))  # noqa: B023 - called at once
            begun = time.perf_counter()
            copies = private_copy.make([folder], Path(space))
            copied = time.perf_counter() - begun
            private_copy.remove(copies[0].parent)
            print(f"private copy of a {mib} MiB learner: {copied * 1000:.0f} ms once per run "
                  f"(reading it in place once: {in_place * 1000:.0f} ms)")


if __name__ == "__main__":
    main()
