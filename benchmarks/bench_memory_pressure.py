"""How many bits a test task passes to the next through memory-pressure eviction (issue 34,
"measure what remains": docs/internals.md, the page cache under memory pressure).

A task cannot read residency through an oracle (seccomp refuses them), but it can time a touch:
a page in the page cache faults in ~1 us, one read from disk in more (>= 10 us counts). It
cannot drop a page (fadvise, madvise PAGEOUT refused), but it can fill its cgroup up to the
memory limit, and the kernel then reclaims the cgroup's page-cache pages, coldest first. The
sender, at the end of its `predict`, reads the pages of the bits it sends as 0 twice (they
become active, reclaimed last), then allocates up to near its limit (`memory.max` -
`memory.current` - a margin where it can read them, else `--pressure-mb`; stopping where
reclaim begins, by the time of each step, stopped at 160 MiB on the loaded host: a
preempted step looks the same) and frees it; the
next task, first thing in `load`, times one touch of every page of every bit and counts per bit
the slow ones. The pages are random pages of a large file of the sandbox image that the run
does not otherwise read (`torch/lib/libtorch_cpu.so`, 414 MiB, beyond the parts torch's import
maps in). It also times faulting in 256 MiB of its own anonymous memory (allocation timing
after another task's pressure).

Two arms, in the platform's meta-test sandbox (1 CPU, 2 GiB), the worker's executor:
- `prefault` (what the worker does): the image is read by `worker.prefault.prefault_image`
  before the run; those pages are charged outside the run's cgroup, which cannot reclaim them;
- `evicted` (the control): the file's pages are dropped from the host's page cache before the
  run (as host reclaim may leave them), so the run's first task faults them in, charged to the
  run's cgroup, where the next sender's pressure can reclaim them.

    .venv/bin/python benchmarks/bench_memory_pressure.py [--tasks 20] [--arms prefault,evicted]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path

from bench_cache_timing import decode, run_docker
from bench_task_namespaces import IMAGE
from benchlib import scratch_dir

import docker
from starting_kit.sample_data import generate_collection

TARGET = "torch/lib/libtorch_cpu.so"

PRESSURE_MODEL = r'''
import json, mmap, os, resource, sys, time
import numpy as np
import torch
from submission_api.api import Learner, MetaLearner, Predictor

BITS, PAGES, PAGE, MARGIN = {bits}, {pages}, 4096, {margin_mb} << 20
PRESSURE = {pressure_mb} << 20
TARGET = os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cpu.so")


def _table(size):
    rng = np.random.default_rng(34)
    return rng.choice(size // PAGE, BITS * PAGES, replace=False).reshape(BITS, PAGES) * PAGE


def _cgroup(name):
    try:
        text = open("/sys/fs/cgroup/" + name).read().strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


class Channel:
    def __init__(self):
        fd = os.open(TARGET, os.O_RDONLY)
        try:
            self.view = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        self.view.madvise(mmap.MADV_RANDOM)
        self.table = _table(len(self.view))

    def receive(self):
        started = time.time()
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt
        slow = np.zeros(self.table.shape, bool)
        for b, p in np.ndindex(self.table.shape):
            t0 = time.perf_counter_ns()
            self.view[int(self.table[b, p])]
            slow[b, p] = time.perf_counter_ns() - t0 > 10_000
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_majflt - faults
        t0 = time.perf_counter()
        block = np.ones(256 << 20, np.uint8)
        alloc_ms = (time.perf_counter() - t0) * 1000
        del block
        return {{"t": started, "hits": slow.sum(axis=1).tolist(), "cold": int(faults),
                "warm": alloc_ms}}

    def send(self, bits):
        self.view.close()  # MADV_RANDOM: unmapping marks nothing accessed
        fd = os.open(TARGET, os.O_RDONLY)
        try:
            for _ in range(2):  # the 0 bits' pages read twice: active, reclaimed last
                for b in np.flatnonzero(np.asarray(bits) == 0):
                    for offset in self.table[b]:
                        os.pread(fd, 1, int(offset))
        finally:
            os.close(fd)
        limit, used = _cgroup("memory.max"), _cgroup("memory.current")
        want = (limit - used - MARGIN) if limit and used else PRESSURE
        blocks = []
        for _ in range(max(0, want) >> 24):  # 16 MiB at a time, touched
            blocks.append(np.ones(16 << 20, np.uint8))
        peak = _cgroup("memory.peak")
        del blocks
        return time.time(), want >> 20, [peak, limit, used]


class MyPredictor(Predictor):
    def __init__(self, channel):
        self.channel = channel

    def predict(self, query_set):
        bits = (np.frombuffer(os.urandom(BITS), np.uint8) & 1).tolist()
        sent, want_mb, peak = self.channel.send(bits)
        sys.stderr.write("MEM-SENT " + json.dumps(
            {{"t": sent, "bits": bits, "pressure_mb": want_mb, "peak": peak}}) + "\n")
        sys.stderr.flush()
        return np.zeros(len(query_set), np.int64)


class MyLearner(Learner):
    def __init__(self):
        self.channel = None

    def load(self, path):
        self.channel = Channel()
        sys.stderr.write("MEM-HEARD " + json.dumps(self.channel.receive()) + "\n")

    def fit(self, support_set):
        return MyPredictor(self.channel or Channel())

    def save(self, path):
        open(os.path.join(path, "learner.txt"), "w").write("pressure")


class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
'''


def write_probe(folder: Path, bits: int, pages: int, margin_mb: int, pressure_mb: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(PRESSURE_MODEL.format(
        bits=bits, pages=pages, margin_mb=margin_mb, pressure_mb=pressure_mb))
    return folder


def host_copies(client: docker.DockerClient, relative: str) -> list[Path]:
    """The image's layer files (overlay2's lower folders) that hold `relative` under a
    dist-packages folder: their page cache is the containers'."""
    layers = client.api.inspect_image(IMAGE)["GraphDriver"]["Data"]["LowerDir"].split(":")
    upper = client.api.inspect_image(IMAGE)["GraphDriver"]["Data"].get("UpperDir")
    found: list[Path] = []
    for layer in [*layers, *([upper] if upper else [])]:
        found += Path(layer).glob(f"usr/local/lib/python3*/dist-packages/{relative}")
    return found


def evict(paths: list[Path]) -> None:
    for path in paths:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--bits", type=int, default=32)
    parser.add_argument("--pages", type=int, default=16, help="pages per bit")
    parser.add_argument("--margin-mb", type=int, default=160,
                        help="left free below memory.max by the sender")
    parser.add_argument("--pressure-mb", type=int, default=1100,
                        help="what the sender allocates where it cannot read its cgroup")
    parser.add_argument("--arms", default="prefault,evicted")
    args = parser.parse_args()
    client = docker.from_env()
    files = host_copies(client, TARGET)
    if not files:
        raise SystemExit(f"{TARGET} not found in {IMAGE}'s layers: run as root on the host")
    scratch = scratch_dir("memory-pressure")
    root = Path(scratch.name)
    collection = root / "collection"
    generate_collection(collection, n_classes=20, n_images=40)
    submission = write_probe(root / "probe", args.bits, args.pages, args.margin_mb,
                             args.pressure_mb)
    for arm in args.arms.split(","):
        evict(files)
        if arm == "prefault":
            from worker.prefault import prefault_image

            prefault_image(client, IMAGE)
        load = os.getloadavg()[0]
        log = run_docker(root, collection, submission, args.tasks, f"pressure-{arm}")
        sent = [json.loads(line.split(" ", 1)[1]) for line in log.splitlines()
                if line.startswith("MEM-SENT ")]
        result = decode(log, args.pages, prefix="MEM")
        result["major_faults_alloc_256mib_ms"] = result.pop("cold_warm")
        print(json.dumps({"arm": arm, "load": [round(load, 1), round(os.getloadavg()[0], 1)],
                          **result,
                          "pressure_mb_median": statistics.median(
                              s["pressure_mb"] for s in sent) if sent else None,
                          "cgroup_peak_limit_used_mib": [(v or 0) >> 20 for v in sent[-1]["peak"]]
                          if sent else None}), flush=True)


if __name__ == "__main__":
    main()
