"""How many bits the CPU caches carry from one test task to the next (issue 34, "measure what
remains": docs/internals.md, the CPU-cache row of "What remains by construction").

A hostile submission ships a file (`lines.bin`) and a small native helper (`probe.so`, built
here with gcc: a participant may ship compiled code). Every task maps the file read-only; all
tasks of a run map the same physical pages (the run's private tmpfs copy of the submission),
so a cache line of it that one task brought into the last-level cache is a hit for the next:
Flush+Reload across the task boundary. At the end of its `predict` a task flushes every line of
the channel (`clflush` works on any readable mapping) and reads the lines of the bits it sends
as 1; the next task, first thing in `load`, times one read of every line (`rdtscp`) and counts
per bit how many of its lines hit. Each bit has its own `--lines` lines, each on its own page,
probed in a random order (no prefetcher helps). A hit is a read under the threshold the task
calibrates itself (the midpoint of a flushed and a just-read set's medians).

Sent bits (random per task) and what the next task measured go to stderr; the benchmark decodes
a bit as 1 when at least t of its lines hit, t calibrated once per run over all boundaries (what
an attacker gets by sending a known preamble first), and reports the bit error rate, the
capacity of the binary symmetric channel (bits per boundary), and the gap between one task's
last touch and the next task's first read.

    .venv/bin/python benchmarks/bench_cache_timing.py [--tasks 40] [--bits 256] [--lines 8] \\
        [--docker]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import threading
from pathlib import Path

from bench_task_isolation import protocol
from benchlib import scratch_dir

from starting_kit.sample_data import generate_collection
from submission_api.runner.local import run_local

NATIVE = r"""
#include <stdint.h>
#include <x86intrin.h>
void flush_lines(const char *base, const int64_t *off, int64_t n) {
    for (int64_t i = 0; i < n; i++) _mm_clflush(base + off[i]);
    _mm_mfence();
}
void touch_lines(const char *base, const int64_t *off, int64_t n) {
    for (int64_t i = 0; i < n; i++) (void)*(volatile const char *)(base + off[i]);
    _mm_mfence();
}
void probe_lines(const char *base, const int64_t *off, int64_t n, uint32_t *cycles) {
    unsigned aux;
    for (int64_t i = 0; i < n; i++) {
        _mm_mfence(); _mm_lfence();
        uint64_t t0 = __rdtscp(&aux);
        _mm_lfence();
        (void)*(volatile const char *)(base + off[i]);
        _mm_lfence();
        uint64_t t1 = __rdtscp(&aux);
        cycles[i] = (uint32_t)(t1 - t0);
    }
}
"""

CACHE_MODEL = r'''
import ctypes, json, mmap, os, sys, time
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor

BITS, LINES, PAGE, LINE, USED = {bits}, {lines}, 4096, 64, 48
HERE = os.path.dirname(os.path.abspath(__file__))


def _offsets():
    """Line offsets: bit b's lines are row b of the table, then a calibration set; lines 8-55
    of each page in a random order (few pages: a TLB miss under nested paging costs more than
    the cache's difference; line 0 of each page warms the TLB), the same in every task."""
    rng = np.random.default_rng(34)
    lines = BITS * LINES + 512
    pages = -(-lines // USED)
    slots = (np.arange(pages)[:, None] * PAGE + np.arange(8, 8 + USED)[None, :] * LINE)
    where = rng.permutation(slots.reshape(-1))[:lines].astype(np.int64)
    return where[: BITS * LINES].reshape(BITS, LINES), where[BITS * LINES:], pages


class Channel:
    def __init__(self):
        self.lib = ctypes.CDLL(os.path.join(HERE, "probe.so"))
        fd = os.open(os.path.join(HERE, "lines.bin"), os.O_RDONLY)
        try:
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            self.view = mmap.mmap(fd, 0, flags=flags, prot=mmap.PROT_READ)
        finally:
            os.close(fd)
        self.base = np.frombuffer(self.view, np.uint8).ctypes.data
        self.table, self.calibration, pages = _offsets()
        self.tlb = np.arange(pages, dtype=np.int64) * PAGE

    def _call(self, name, offsets, out=None):
        offsets = np.ascontiguousarray(offsets, np.int64)
        args = [ctypes.c_void_p(self.base), offsets.ctypes.data_as(ctypes.c_void_p),
                ctypes.c_int64(offsets.size)]
        if out is not None:
            args.append(out.ctypes.data_as(ctypes.c_void_p))
        getattr(self.lib, name)(*args)

    def probe(self, offsets):
        cycles = np.zeros(offsets.size, np.uint32)
        self._call("probe_lines", offsets, cycles)
        return cycles

    def receive(self):
        started = time.time()
        self._call("touch_lines", self.tlb)
        order = np.random.default_rng().permutation(self.table.size)
        flat = self.table.reshape(-1)
        cycles = np.empty(flat.size, np.uint32)
        cycles[order] = self.probe(flat[order])
        half = self.calibration.size // 2
        self._call("flush_lines", self.calibration[:half])
        self._call("touch_lines", self.tlb)
        cold = self.probe(self.calibration[:half])
        self._call("touch_lines", self.calibration[half:])
        self._call("touch_lines", self.tlb)
        warm = self.probe(self.calibration[half:])
        threshold = (float(np.median(cold)) + float(np.median(warm))) / 2
        hits = (cycles.reshape(BITS, LINES) < threshold).sum(axis=1)
        return {{"t": started, "hits": hits.tolist(), "cold": float(np.median(cold)),
                "warm": float(np.median(warm))}}

    def send(self, bits):
        self._call("flush_lines", self.table.reshape(-1))
        ones = self.table[np.asarray(bits, bool)].reshape(-1)
        self._call("touch_lines", ones)
        return time.time()


class MyPredictor(Predictor):
    def __init__(self, channel):
        self.channel = channel

    def predict(self, query_set):
        bits = np.frombuffer(os.urandom(BITS), np.uint8) & 1
        answer = np.zeros(len(query_set), np.int64)
        sent = self.channel.send(bits)
        sys.stderr.write("CACHE-SENT " + json.dumps({{"t": sent, "bits": bits.tolist()}}) + "\n")
        sys.stderr.flush()
        return answer


class MyLearner(Learner):
    def __init__(self):
        self.channel = None

    def load(self, path):
        self.channel = Channel()
        heard = self.channel.receive()
        sys.stderr.write("CACHE-HEARD " + json.dumps(heard) + "\n")

    def fit(self, support_set):
        return MyPredictor(self.channel or Channel())

    def save(self, path):
        open(os.path.join(path, "learner.txt"), "w").write("cache")


class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
'''


def write_probe(folder: Path, bits: int, lines: int) -> Path:
    """The submission: model.py, probe.so and the shared file (one page per line used)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(CACHE_MODEL.format(bits=bits, lines=lines))
    (folder / "probe.c").write_text(NATIVE)
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(folder / "probe.so"),
                    str(folder / "probe.c")], check=True)
    (folder / "probe.c").unlink()
    (folder / "lines.bin").write_bytes(os.urandom((-(-(bits * lines + 512) // 48)) * 4096))
    return folder


def run_here(root: Path, collection: Path, submission: Path, tasks: int) -> str:
    out = root / "local"
    result = run_local(submission, collection, out, protocol=protocol(tasks),
                       cache_dir=root / "cache")
    assert result.state == "finished", result.message
    return (out / "stderr.txt").read_text()


def run_docker(root: Path, collection: Path, submission: Path, tasks: int,
               name: str = "cache-timing") -> str:
    """The meta-test stage in the platform's sandbox (`bench_task_namespaces.run_meta_test`'s
    request), keeping the container's stderr."""
    from bench_task_namespaces import IMAGE

    import docker
    from submission_api.data import load_collection
    from submission_api.runner.prepare import prepare_run
    from worker.pipeline.execute import ExecutionRequest, make_docker_executor

    work = root / f"docker-{name}"
    prepare_run(load_collection(collection, root / "cache"), protocol(tasks), (0, 0),
                work / "bundle", work / "answers")
    (work / "output").mkdir()
    request = ExecutionRequest(
        run_id=34, image=IMAGE, submission_dir=submission, bundle_dir=work / "bundle",
        output_dir=work / "output", time_limit_s=1200, cpus=1, memory_mb=2048,
        answers_dir=work / "answers", name=f"arena-bench-{name}")
    result = make_docker_executor(docker.from_env(), task_namespaces=True)(
        request, threading.Event())
    if result.exit_code != 0 or "-HEARD" not in str(result.stderr):
        print(f"sandbox exit {result.exit_code}, oom_killed {result.oom_killed}, timed out "
              f"{result.timed_out}: {str(result.stderr)[-2000:]}", flush=True)
    return str(result.stderr)


def entropy(p: float) -> float:
    return 0.0 if p <= 0 or p >= 1 else -p * math.log2(p) - (1 - p) * math.log2(1 - p)


def _best_threshold(pairs: list, lines: int) -> tuple[float, int]:
    """The bit error rate at the best threshold on a bit's hit lines, and that threshold."""
    best = (1.0, 0)
    total = len(pairs) * len(pairs[0][0]["bits"])
    for threshold in range(1, lines + 1):
        wrong = sum((h >= threshold) != bool(b) for sent, heard in pairs
                    for b, h in zip(sent["bits"], heard["hits"], strict=True))
        best = min(best, (wrong / total, threshold))
    return best


def decode(log: str, lines: int, prefix: str = "CACHE") -> dict:
    """Pairs each task's sent bits with the next task's hits; the error rate at the best count
    threshold over the whole run, the capacity and the gaps."""
    sent_mark, heard_mark = f"{prefix}-SENT", f"{prefix}-HEARD"
    events = []
    for line in log.splitlines():
        mark, _, body = line.partition(" ")
        if mark in (sent_mark, heard_mark):
            with contextlib.suppress(ValueError):  # a line cut by another's output
                events.append((mark, json.loads(body)))
    pairs = [(a[1], b[1]) for a, b in zip(events, events[1:], strict=False)
             if a[0] == sent_mark and b[0] == heard_mark]
    if not pairs:
        raise SystemExit("no boundary decoded: the probe's stderr holds no sent/heard pair; "
                         f"its end: {log[-3000:]}")
    error, threshold = _best_threshold(pairs, lines)
    # the floor of that choice: the same decoder against bits the receiver cannot have seen
    # (each boundary's sent bits rotated by one position)
    rotated = [({"bits": s["bits"][1:] + s["bits"][:1]}, r) for s, r in pairs]
    null_error, _ = _best_threshold(rotated, lines)
    ones = [h for s, r in pairs for b, h in zip(s["bits"], r["hits"], strict=True) if b]
    zeros = [h for s, r in pairs for b, h in zip(s["bits"], r["hits"], strict=True) if not b]
    bits = len(pairs[0][0]["bits"])
    return {"boundaries": len(pairs), "bits_sent": bits, "per_bit": lines,
            "bit_error_rate": round(error, 4), "threshold_lines": threshold,
            "capacity_bits_per_boundary": round(bits * (1 - entropy(error)), 1),
            "null_error_rate": round(null_error, 4),
            "null_capacity": round(bits * (1 - entropy(null_error)), 1),
            "mean_hits_sent_1": round(statistics.mean(ones), 2),
            "mean_hits_sent_0": round(statistics.mean(zeros), 2),
            "gap_ms_median": round(statistics.median(
                (r["t"] - s["t"]) * 1000 for s, r in pairs), 1),
            "cold_warm": [round(statistics.median(r["cold"] for _, r in pairs)),
                          round(statistics.median(r["warm"] for _, r in pairs))]}


def control(submission: Path, gaps_ms: tuple[float, ...] = (0, 10, 100)) -> dict:
    """The same send and receive in this one process, `gap` apart (no task boundary, no runner
    between them): what the probe decodes where only the host's other work evicts."""
    import importlib.util
    import time

    spec = importlib.util.spec_from_file_location("cache_probe_model", submission / "model.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    channel = module.Channel()
    found = {}
    for gap in gaps_ms:
        log = []
        for _ in range(5):
            bits = [int(b) & 1 for b in os.urandom(channel.table.shape[0])]
            log.append("CACHE-SENT " + json.dumps({"t": channel.send(bits), "bits": bits}))
            time.sleep(gap / 1000)
            log.append("CACHE-HEARD " + json.dumps(channel.receive()))
        decoded = decode("\n".join(log), channel.table.shape[1])
        found[f"{gap:g} ms"] = {k: decoded[k] for k in (
            "bit_error_rate", "capacity_bits_per_boundary", "mean_hits_sent_1",
            "mean_hits_sent_0", "null_capacity")}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--bits", type=int, default=256)
    parser.add_argument("--lines", type=int, default=8, help="lines (pages) per bit")
    parser.add_argument("--docker", action="store_true", help="the platform's sandbox")
    parser.add_argument("--control", action="store_true",
                        help="also send and receive in this process, without a boundary")
    args = parser.parse_args()
    scratch = scratch_dir("cache-timing")
    root = Path(scratch.name)
    collection = root / "collection"
    generate_collection(collection, n_classes=20, n_images=40)
    submission = write_probe(root / "probe", args.bits, args.lines)
    load = os.getloadavg()[0]
    if args.control:
        print(json.dumps({"where": "one process, no boundary", "load": round(load, 1),
                          **control(submission)}), flush=True)
    log = (run_docker if args.docker else run_here)(root, collection, submission, args.tasks)
    where = "Docker sandbox" if args.docker else "arena run"
    print(json.dumps({"where": where, "load": [round(load, 1), round(os.getloadavg()[0], 1)],
                      **decode(log, args.lines)}), flush=True)


if __name__ == "__main__":
    main()
