"""The platform against `arena run` of the same phase, on a quiet host and on a loaded one
(issue 38.3): upload to score of a trivial submission, side by side, as ratios; and whether any
honest run was charged for the host's load.

    .venv/bin/python benchmarks/bench_loaded_host.py [--pairs 3] [--load 0,18] [--limit 90]

For each load level (busy `python` loops outside any sandbox, started before and killed after
the pairs), pairs of (a) `run_local` (what `arena run` does) and (b) upload over HTTP, a worker
(`python -m worker`, Docker sandbox, 1 CPU, pinned to its slot's core with
ARENA_WORKER_CPUS_PER_SLOT=1), scoring and the leaderboard API, alternating which goes first.
(b) is timed from the upload POST to the submission's first appearance on the board; its run's
state, reason and stored usage (per stage wall, CPU time, time spent waiting for a core) are
printed. The phase's time limit is `--limit` s (the example bundle's 90 s).

Needs Postgres, Redis, Docker and the sandbox image, as `bench_platform_overhead.py`, whose
platform, collection and submission it reuses.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]  # platform_support's own helpers

from bench_platform_overhead import (  # noqa: E402
    PROTOCOL,
    BenchPlatform,
    bench_platform,
    make_collection,
    make_submission,
    zip_submission,
)

TERMINAL = ("finished", "failed", "timed_out", "cancelled")
os.environ.setdefault("ARENA_TEST_SEED_SECRET", "bench-only-test-seed-secret-0123456789abcdef")


@contextmanager
def host_load(count: int) -> Iterator[None]:
    """`count` busy loops on the host, outside any sandbox; killed by pid at the end."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(count)]
    try:
        time.sleep(5 if count else 0)  # let the load average feel them
        yield
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def run_direct(submission: Path, collection: Path, cache: Path, out: Path,
               limit_s: float) -> tuple[float, str]:
    """(a) `arena run`: the participant side in subprocesses, as the starting kit does."""
    from submission_api.protocols import ProtocolParams
    from submission_api.runner.local import run_local

    start = time.time()
    result = run_local(submission, collection, out, protocol=ProtocolParams.from_dict(PROTOCOL),
                       seed=0, phase_seed=0, threads=1, cache_dir=cache, time_limit_s=limit_s)
    return time.time() - start, str(result.state)


def run_platform(platform: BenchPlatform, phase_id: int, archive: Path,
                 timeout_s: float) -> tuple[float, dict]:
    """(b) upload -> on the leaderboard (or a terminal state that is not `finished`)."""
    token = platform.create_user(f"u{uuid.uuid4().hex[:8]}")
    start = time.time()
    submission_id = platform.submit(token, phase_id, archive)
    with httpx.Client(base_url=platform.base_url, timeout=60,
                      headers={"Authorization": f"Bearer {token}"}) as client:
        while time.time() - start < timeout_s:
            board = client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()
            if any(e["submission_id"] == submission_id for e in board["entries"]):
                break
            sub = client.get(f"/api/v1/submissions/{submission_id}").json()
            if sub["state"] in TERMINAL and sub["state"] != "finished":
                break
            time.sleep(0.05)
    wall = time.time() - start
    return wall, run_record(platform, submission_id)


def run_record(platform: BenchPlatform, submission_id: int) -> dict:
    """The run's state, reason, attempts and stored usage, from the server's database."""
    import psycopg

    url = platform.database_url.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT r.state, r.reason, r.usage, r.platform_failures FROM runs r "
                           "WHERE r.submission_id = %s ORDER BY r.index LIMIT 1",
                           (submission_id,)).fetchone()
    assert row is not None, f"no run of submission {submission_id}"
    state, reason, usage, faults = row
    return {"state": state, "reason": reason, "usage": usage or {}, "platform_faults": faults}


def describe(usage: dict) -> str:
    parts = []
    for stage in usage.get("stages", []):
        stall = stage.get("stall_s")
        waited = "?" if stall is None else f"{stall:.1f}"
        parts.append(f"{stage['stage']} wall {stage['wall_s']:.1f} cpu "
                     f"{stage.get('cpu_s') or 0:.1f} waited {waited}")
    tasks = usage.get("tasks")
    if tasks:
        parts.append(f"{tasks['count']} tasks median {tasks['median_s'] * 1000:.0f} ms")
    return "; ".join(parts)


def loadavg() -> float:
    return os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--load", default="0,18", help="busy loops per level, comma-separated")
    parser.add_argument("--limit", type=int, default=90, help="the phase's time limit, s")
    args = parser.parse_args()
    levels = [int(x) for x in args.load.split(",")]

    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        root = Path(tmp)
        os.chmod(root, 0o755)
        collection, cache = make_collection(root)
        trivial = make_submission(root / "trivial", "sleep", 0.0)
        archive = zip_submission(trivial)
        rows = []
        with bench_platform(root / "platform") as platform:
            organizer = platform.create_user("organizer", "organizer")
            data = platform.register_collection(collection, cache)
            phase_id = platform.create_phase(organizer, data, protocol=PROTOCOL,
                                             time_limit_s=args.limit,
                                             resources={"cpus": 1, "memory_mb": 2048, "gpus": 0})
            platform.start_worker("w1", ARENA_WORKER_CPUS_PER_SLOT="1")
            run_platform(platform, phase_id, archive, 600)  # warm: datasets fetched, imports
            for busy in levels:
                with host_load(busy):
                    for i in range(args.pairs):
                        order = ("a", "b") if i % 2 == 0 else ("b", "a")
                        got: dict[str, tuple] = {}
                        for which in order:
                            load = loadavg()
                            if which == "a":
                                got["a"] = (*run_direct(trivial, collection, cache,
                                                        root / f"local-{busy}-{i}", args.limit),
                                            load)
                            else:
                                wall, record = run_platform(platform, phase_id, archive,
                                                            args.limit * 4 + 120)
                                got["b"] = (wall, record, load)
                        rows.append((busy, got["a"], got["b"]))
                        (a_s, a_state, a_load), (b_s, rec, b_load) = got["a"], got["b"]
                        print(f"busy {busy:>2} pair {i}: arena run {a_s:6.1f} s ({a_state}, "
                              f"load {a_load:.1f}) | platform {b_s:6.1f} s ({rec['state']}"
                              f"{' ' + rec['reason'] if rec['reason'] else ''}, "
                              f"{rec['platform_faults']} platform faults, load "
                              f"{b_load:.1f}) | {b_s / a_s:.2f}x | {describe(rec['usage'])}",
                              flush=True)
        print(f"\n{'busy loops':>10}{'load (a/b)':>16}{'(a) arena run s':>17}"
              f"{'(b) platform s':>16}{'(b)/(a)':>9}  platform states")
        for busy in levels:
            mine = [r for r in rows if r[0] == busy]
            ratios = [b[0] / a[0] for _, a, b in mine]
            print(f"{busy:>10}{statistics.median(a[2] for _, a, _ in mine):>8.1f}/"
                  f"{statistics.median(b[2] for _, _, b in mine):<7.1f}"
                  f"{statistics.median(a[0] for _, a, _ in mine):>17.1f}"
                  f"{statistics.median(b[0] for _, _, b in mine):>16.1f}"
                  f"{statistics.median(ratios):>9.2f}  "
                  f"{sorted(b[1]['state'] for _, _, b in mine)}; ratios "
                  f"{', '.join(f'{r:.2f}' for r in ratios)}")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # clean up: load, platform, db
    main()
