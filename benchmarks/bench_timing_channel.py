"""How many bits the wall clock and the pid counter carry from one test task to the next (issue 19,
the channels that remain by construction: docs/internals.md, "What remains by construction").

A submission that never looks at a pixel's meaning encodes a value v in [0, M) (a digest of its
own support images) in *when it ends*: its `predict` spins until `floor(time / slot) mod M == v`.
The next task reads the phase of the clock when its `fit` starts and writes it into its
predictions (binary digits in the first labels, then its own v), where the benchmark reads
both back from the saved predictions. The gap between one task's end and the next one's `fit`
(its process's exit, the sweep, the next start) is about constant, so `(phase - v) mod M` is
one number when the channel works; the share of boundaries at that number is the decoding
rate, and the capacity of an M-ary symmetric channel with that error rate is the bits per
boundary an attacker gets at that slot width (it spends up to `M * slot` of its time limit per
task on it).

The pid counter the same way: a task forks until its last child's pid is v modulo M; the next
task reads the newest pid it can see in `/proc` (the container's: the standby made for the task
after it), v plus a constant.

Runs under `arena run` (the local launcher, own namespaces where the kernel allows) and, with
`--docker`, in the platform's meta-test sandbox (`metadl-arena/sandbox:cpu`).

    .venv/bin/python benchmarks/bench_timing_channel.py [--tasks 40] [--docker]
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from pathlib import Path

import numpy as np
from bench_task_isolation import protocol
from benchlib import scratch_dir

from starting_kit.sample_data import generate_collection
from submission_api.runner.local import run_local

CLOCK_MODEL = r'''
import hashlib, os, time
import numpy as np
from submission_api.api import Learner, MetaLearner, Predictor

CHANNEL, SLOT, LEVELS = {channel!r}, {slot}, {levels}


def phase():
    if CHANNEL == "pids":  # the newest process this task can see: the next task's standby
        time.sleep(0.2)  # made while this task starts: let it be there
        return max(int(p) for p in os.listdir("/proc") if p.isdigit()) % LEVELS
    return int(time.time() / SLOT) % LEVELS


def say(value):
    if CHANNEL == "pids":  # fork until the pid counter stands at `value`
        for _ in range(4 * LEVELS):
            read, write = os.pipe()
            child = os.fork()
            if child == 0:  # its pid as /proc numbers it (fork() names it in our namespace)
                os.write(write, os.readlink("/proc/self").encode())
                os._exit(0)
            os.close(write)
            outer = int(os.read(read, 32) or b"0")
            os.close(read)
            os.waitpid(child, 0)
            if outer % LEVELS == value:
                return
        return
    while phase() != value:  # the message: when this task ends
        pass


class MyPredictor(Predictor):
    def __init__(self, heard, value):
        self.heard, self.value = heard, value

    def predict(self, query_set):
        digits = []
        for number in (self.heard, self.value):  # 16 binary digits each (any n_ways >= 2)
            digits += [(number >> bit) & 1 for bit in range(16)]
        digits += [0] * (len(query_set) - len(digits))
        say(self.value)
        return np.array(digits)


class MyLearner(Learner):
    def fit(self, support_set):
        heard = phase()  # what the previous task's end says
        images = support_set[0]
        value = int(hashlib.sha1(images.numpy().tobytes()).hexdigest(), 16) % LEVELS
        return MyPredictor(heard, value)

    def save(self, path):
        open(path + "/learner.txt", "w").write("clock")

    def load(self, path):
        pass


class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        return MyLearner()
'''


def write_clock(folder: Path, channel: str, slot: float, levels: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.py").write_text(CLOCK_MODEL.format(channel=channel, slot=slot,
                                                        levels=levels))
    return folder


def read_values(predictions: Path) -> tuple[list[int], list[int]]:
    """(what each task heard, what each task sent), from the labels it answered."""
    heard, sent = [], []
    for path in sorted(predictions.glob("task_*.npy")):
        bits = [int(d) for d in np.load(path)[:32]]
        heard.append(sum(b << i for i, b in enumerate(bits[:16])))
        sent.append(sum(b << i for i, b in enumerate(bits[16:])))
    return heard, sent


def window_90(gaps: list[int], levels: int) -> int:
    """The narrowest circular window of offsets that holds 90% of `gaps`: a decoder that reads
    a value as "within this window" tells about levels / window values apart."""
    need = math.ceil(0.9 * len(gaps))
    best = levels
    for start in set(gaps):
        spans = sorted((g - start) % levels for g in gaps)
        best = min(best, spans[need - 1] + 1)
    return best


def capacity(levels: int, error: float) -> float:
    """Bits per use of an M-ary symmetric channel that errs with probability `error`."""
    if error <= 0:
        return math.log2(levels)
    if error >= 1 - 1 / levels:
        return 0.0
    return (math.log2(levels) + (1 - error) * math.log2(1 - error)
            + error * math.log2(error / (levels - 1)))


def run_here(root: Path, collection: Path, cache: Path, tasks: int, channel: str, slot: float,
             levels: int) -> Path:
    out = root / f"local-{channel}-{slot}-{levels}"
    result = run_local(write_clock(root / f"{channel}-{slot}-{levels}", channel, slot, levels),
                       collection, out, protocol=protocol(tasks), cache_dir=cache)
    assert result.state == "finished", result.message
    return out / "predictions"


def run_docker(root: Path, collection: Path, cache: Path, tasks: int, channel: str,
               slot: float, levels: int) -> Path:
    from bench_task_namespaces import run_meta_test

    import docker

    name = f"{channel}-{slot}-{levels}"
    answers = run_meta_test(docker.from_env(), root / f"docker-{name}", collection, cache, tasks,
                            write_clock(root / name, channel, slot, levels))
    return answers / "predictions"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--docker", action="store_true")
    parser.add_argument("--grid", type=str,
                        default="clock:0.1:8,clock:0.04:16,clock:0.01:64,clock:0.002:256,"
                                "pids:0:16,pids:0:256,pids:0:4096",
                        help="channel:slot seconds:levels triples (channel clock or pids)")
    parser.add_argument("--verbose", action="store_true", help="print each gap's count")
    args = parser.parse_args()
    scratch = scratch_dir("timing-channel")
    root = Path(scratch.name)
    collection, cache = root / "collection", root / "cache"
    generate_collection(collection, n_classes=20, n_images=40)
    launch = run_docker if args.docker else run_here
    where = "Docker sandbox" if args.docker else "arena run"
    for triple in args.grid.split(","):
        channel, slot_text, levels_text = triple.split(":")
        slot, levels = float(slot_text), int(levels_text)
        predictions = launch(root, collection, cache, args.tasks, channel, slot, levels)
        heard, sent = read_values(predictions)
        gaps = [(heard[i + 1] - sent[i]) % levels for i in range(len(sent) - 1)]
        gap, hits = Counter(gaps).most_common(1)[0]
        error = 1 - hits / len(gaps)
        width = window_90(gaps, levels)
        if args.verbose:
            print(f"  gaps: {sorted(Counter(gaps).items())}")
        how = (f"up to {4 * levels} forks a task" if channel == "pids"
               else f"slot {slot * 1000:g} ms, up to {slot * levels * 1000:.0f} ms a task")
        print(f"{where}, {channel}, {levels} levels ({math.log2(levels):.0f} bits, {how}): "
              f"{hits}/{len(gaps)} boundaries "
              f"decoded (gap {gap} slots), capacity {capacity(levels, error):.2f} bits per "
              f"boundary; 90% of the offsets within {width} of {levels}: "
              f"~{math.log2(levels / width):.1f} bits", flush=True)


if __name__ == "__main__":
    main()
