"""Scale-out: 1, 2 and 4 worker processes (each Celery concurrency 1, CPU sandboxes) draining one
queue of small submissions; throughput relative to one worker, and why it stops scaling.

    .venv/bin/python benchmarks/bench_scale_out.py [--workers 1,2,4] [--submissions 16]
                                                   [--seconds 3] [--work compute]

For each worker count: start that many `python -m worker` processes on the same Redis queue
(one host, so they share the download cache under one data dir, as fetch.py intends), wait
until each answers a ping, upload `--submissions` submissions at once (one user each), and wait
until every one is finished. Makespan = first upload to the last run's `finished_at` (server
clock); throughput = submissions / makespan. A warm-up submission fills the dataset cache
before the first timed batch. Each submission's meta_fit does `--seconds` of single-thread
compute (calibrated here; `--work sleep` sleeps instead, which shows the platform's own
ceiling when the sandboxes need no CPU). Also printed: the mean number of containers running
at once (from Docker's events) and the median container lifetime, which grows when the
sandboxes compete for the host's cores.

Needs what bench_platform_overhead.py needs (Postgres, Redis, Docker, the sandbox image).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_platform_overhead import (  # noqa: E402
    PROTOCOL,
    DockerEvents,
    bench_platform,
    calibrate_matmuls,
    make_collection,
    make_submission,
    zip_submission,
)


def drain(platform, phase_id: int, archive: Path, n: int, events: DockerEvents) -> dict:
    """Upload `n` submissions at once and wait for all; figures of the batch."""
    tokens = [platform.create_user(f"s{uuid.uuid4().hex[:8]}") for _ in range(n)]
    start = time.time()
    ids = [(token, platform.submit(token, phase_id, archive)) for token in tokens]
    finals = []
    for token, sid in ids:
        final = platform.wait_terminal(token, sid, timeout_s=1800)
        assert final["state"] == "finished", final
        finals.append(final)
    times = [platform.run_times(sid) for _, sid in ids]
    end = max(t["finished"] for t in times)
    lifetimes, intervals = [], []
    for final in finals:
        stamps = events.for_run(final["runs"][0]["id"])
        if "start" in stamps and "die" in stamps:
            lifetimes.append(stamps["die"] - stamps["start"])
            intervals.append((stamps["start"], stamps["die"]))
    busy = sum(b - a for a, b in intervals)
    return {"makespan_s": end - start, "throughput": n / (end - start),
            "containers_at_once": busy / (end - start),
            "container_s": statistics.median(lifetimes) if lifetimes else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4", help="worker counts, in this order")
    parser.add_argument("--submissions", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=3.0, help="meta_fit work per run")
    parser.add_argument("--work", choices=("sleep", "compute"), default="compute")
    args = parser.parse_args()
    counts = [int(c) for c in args.workers.split(",")]

    with tempfile.TemporaryDirectory(prefix="arena-bench-scale-") as tmp:
        root = Path(tmp)
        os.chmod(root, 0o755)
        collection, cache = make_collection(root)
        amount = args.seconds if args.work == "sleep" else calibrate_matmuls(args.seconds)
        archive = zip_submission(make_submission(root / "small", args.work, amount))
        print(f"{args.submissions} submissions, meta_fit {args.work} {amount} "
              f"(~{args.seconds:g} s), {os.cpu_count()} CPUs, each sandbox 1 CPU")
        with bench_platform(root / "platform") as platform:
            organizer = platform.create_user("organizer", "organizer")
            data = platform.register_collection(collection, cache)
            phase_id = platform.create_phase(organizer, data, protocol=PROTOCOL,
                                             time_limit_s=600,
                                             resources={"cpus": 1, "memory_mb": 1024, "gpus": 0})
            shared = {"ARENA_WORKER_DATA_DIR": str(root / "platform" / "worker-data")}
            events = DockerEvents(root)
            results = {}
            try:
                for round_no, count in enumerate(counts):
                    workers = [platform.start_worker(f"n{count}-{round_no}-{i}", **shared)
                               for i in range(count)]
                    if round_no == 0:
                        drain(platform, phase_id, archive, 1, events)  # fills the cache
                    results.setdefault(count, []).append(
                        drain(platform, phase_id, archive, args.submissions, events))
                    for process in workers:
                        process.terminate()
                    for process in workers:
                        process.wait(timeout=60)
                    platform.workers = [w for w in platform.workers if w not in workers]
            finally:
                events.close()
        base = statistics.median(r["throughput"] for r in results[counts[0]])
        print(f"\n{'workers':<9}{'makespan s':>12}{'runs/min':>10}{'vs 1 worker':>13}"
              f"{'containers at once':>20}{'container s':>13}")
        for count, batch in results.items():
            for r in batch:
                print(f"{count:<9}{r['makespan_s']:>12.1f}{r['throughput'] * 60:>10.1f}"
                      f"{r['throughput'] / base:>12.2f}x{r['containers_at_once']:>20.2f}"
                      f"{r['container_s']:>13.1f}")


if __name__ == "__main__":
    main()
