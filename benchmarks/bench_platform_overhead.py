"""Platform overhead: the same submission and seed run (a) by `arena run` (`run_local`) and (b)
uploaded over HTTP, run by a Celery worker in the Docker sandbox, scored and put on the
leaderboard; prints (b)/(a) wall time and where the platform's fixed costs go.

    .venv/bin/python benchmarks/bench_platform_overhead.py [--seconds 55] [--pairs 2] [--short 3]

The submission's `meta_fit` sleeps for `--seconds` (default) or, with `--work compute`, does a
fixed number of single-thread matmuls calibrated to take about that long here. Sleeping is the
default because it isolates the platform's own cost: on a shared 2-core machine the speed of
compute changes by the minute, which would drown a 10 % overhead in noise between (a) and (b);
`--work compute` adds what the sandbox's CPU quota does to compute.

Each (b) run is timed from four clocks of the same host (so they agree):
- the client: before the upload POST, after it returns (the submission is then queued and its
  job sent), and when the submission first appears on the leaderboard API (polled every 20 ms
  from the moment its container exits);
- the server database: the run's `started_at` (claim) and `finished_at` (finish stored);
- Docker's event stream: container create / start / die, with nanosecond stamps;
- the worker's structured log events (run.claimed, run.prepare.started, run.sandbox.started,
  run.sandbox.finished, run.finish.stored), logged with their creation time by a wrapper that
  configures logging before starting the ordinary `python -m worker`;
and the participant's own prints (module import, meta_fit start and end) in its run log.

Needs Postgres, Redis and Docker with the sandbox image (scripts/services.sh); it uses a
throwaway database, its own Redis db (ARENA_BENCH_REDIS, default db 11) and its own queue name,
so it can run beside the end-to-end tests. `bench_scale_out.py` reuses `BenchPlatform`.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "e2e"), str(ROOT)]

from platform_support import PG_ADMIN_URL, SANDBOX_IMAGE, Platform, free_port, wait_until  # noqa: E402

REDIS_URL = os.environ.get("ARENA_BENCH_REDIS", "redis://127.0.0.1:6379/11")

WORKER_WRAPPER = r"""
import logging, sys
SKIP = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
class Structured(logging.Formatter):
    def format(self, record):
        extra = {k: v for k, v in vars(record).items() if k not in SKIP}
        return f"BENCH-LOG {record.created:.6f} {record.getMessage()} {extra!r}"
handler = logging.StreamHandler(sys.stderr)
handler.setFormatter(Structured())
for name in ("worker", "run"):
    logging.getLogger(name).addHandler(handler)
    logging.getLogger(name).setLevel(logging.INFO)
from worker.cli import worker_command
worker_command()
"""

MODEL = """
import time
print(f"ARENA-T import {time.time():.6f}", flush=True)
import numpy as np, torch
from submission_api.api import MetaLearner, Learner, Predictor

WORK, AMOUNT = __WORK__, __AMOUNT__

class MyPredictor(Predictor):
    def __init__(self, means):
        self.means = means
    def predict(self, query_set):
        return (-torch.cdist(query_set.flatten(1), self.means)).numpy()

class MyLearner(Learner):
    def fit(self, support_set):
        x, y, _, n_ways, _ = support_set
        x = x.flatten(1)
        return MyPredictor(torch.stack([x[y == c].mean(0) for c in range(n_ways)]))
    def save(self, path):
        pass
    def load(self, path):
        pass

class MyMetaLearner(MetaLearner):
    def meta_fit(self, meta_train_generator, meta_valid_generator):
        print(f"ARENA-T meta_fit.start {time.time():.6f}", flush=True)
        if WORK == "sleep":
            time.sleep(AMOUNT)
        else:
            torch.set_num_threads(1)
            a = torch.ones(256, 256)
            for _ in range(int(AMOUNT)):
                a = torch.tanh(a @ a * 1e-3)
        print(f"ARENA-T meta_fit.end {time.time():.6f}", flush=True)
        return MyLearner()
"""


# --- a platform for benchmarks ------------------------------------------------------------------
class BenchPlatform(Platform):
    """The e2e `Platform` on its own Redis db and queue, with workers that log structured events."""

    queue: str = "arena"

    def server_env(self) -> dict[str, str]:
        return {**super().server_env(), "ARENA_BROKER_URL": REDIS_URL,
                "ARENA_DEFAULT_QUEUE": self.queue}

    def start_worker(self, name: str = "w1", ready: bool = True, **env: str) -> subprocess.Popen:
        values = {"ARENA_WORKER_BROKER_URL": REDIS_URL, "ARENA_WORKER_SERVER_URL": self.base_url,
                  "ARENA_WORKER_DATA_DIR": str(self.root / f"worker-{name}"),
                  "ARENA_WORKER_EXECUTOR": "docker", "ARENA_WORKER_NAME": name,
                  "ARENA_WORKER_HEARTBEAT_INTERVAL_S": "10",
                  "ARENA_WORKER_QUEUES": json.dumps([self.queue]),
                  "ARENA_WORKER_MAX_TIME_LIMIT_S": "600", **env}
        log = (self.root / f"worker-{name}.log").open("ab")
        process = subprocess.Popen([sys.executable, "-c", WORKER_WRAPPER],
                                   env={**os.environ, **values}, stdout=log, stderr=log,
                                   start_new_session=True, cwd=ROOT)
        self.workers.append(process)
        if ready:
            self.wait_worker_ready(name)
        return process

    def wait_worker_ready(self, name: str, timeout_s: float = 180) -> None:
        """Until the worker answers a Celery ping (so start-up is not charged to a run)."""
        from celery import Celery

        app = Celery("bench-ping", broker=REDIS_URL)
        wait_until(lambda: app.control.ping(destination=[f"arena@{name}"], timeout=1.0),
                   timeout_s, f"worker {name} to answer a ping", every_s=0.5)

    def worker_events(self, name: str = "w1") -> list[tuple[float, str, dict]]:
        """(time, event, fields) of every structured line the worker `name` logged."""
        events = []
        for line in (self.root / f"worker-{name}.log").read_text(errors="replace").splitlines():
            if "BENCH-LOG " in line:
                _, stamp, event, rest = line[line.index("BENCH-LOG "):].split(" ", 3)
                try:
                    fields = eval(rest, {"__builtins__": {}})  # our own repr of a plain dict
                except Exception:  # noqa: BLE001
                    fields = {}
                events.append((float(stamp), event, fields))
        return events

    def run_times(self, submission_id: int) -> dict[str, float]:
        """The server's timestamps of the submission and its first run, as epoch seconds."""
        import psycopg

        url = self.database_url.replace("postgresql+psycopg://", "postgresql://")
        with psycopg.connect(url) as conn:
            row = conn.execute(
                "SELECT s.created_at, r.enqueued_at, r.started_at, r.finished_at "
                "FROM submissions s JOIN runs r ON r.submission_id = s.id "
                "WHERE s.id = %s ORDER BY r.index LIMIT 1", (submission_id,)).fetchone()
        names = ("created", "enqueued", "claimed", "finished")
        return {n: v.timestamp() for n, v in zip(names, row, strict=True) if v is not None}


@contextmanager
def bench_platform(root: Path):
    """A running server on a throwaway Postgres database; workers are started by the caller."""
    import psycopg
    import redis

    import docker

    redis.Redis.from_url(REDIS_URL, socket_timeout=3).ping()
    docker.from_env().images.get(SANDBOX_IMAGE)
    admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    name = f"arena_bench_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    root.mkdir(parents=True, exist_ok=True)
    base = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    platform = BenchPlatform(root=root, database_url=f"{base}/{name}",
                             base_url=f"http://127.0.0.1:{free_port()}",
                             admin_token=secrets.token_urlsafe(24))
    platform.queue = f"bench-{uuid.uuid4().hex[:8]}"
    try:
        platform.start_server()
        # Run ids far from those of other platforms on this Docker engine: a worker reaps
        # stale containers by the name prefix `arena-run-<run id>-`, whoever started them.
        with psycopg.connect(platform.database_url.replace("+psycopg", "")) as conn:
            conn.execute(f"ALTER SEQUENCE runs_id_seq RESTART WITH "
                         f"{secrets.randbelow(8_000_000) + 1_000_000}")
        yield platform
    finally:
        platform.stop()
        redis.Redis.from_url(REDIS_URL, socket_timeout=3).delete(platform.queue)
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def make_collection(root: Path) -> tuple[Path, Path]:
    """The e2e tests' tiny collection (6 classes x 25 images per domain), compiled once."""
    from starting_kit.sample_data import generate_collection
    from submission_api.data import load_collection

    collection = generate_collection(root / "data" / "tiny", n_classes=6, n_images=25)
    cache = root / "cache"
    load_collection(collection, cache)
    return collection, cache


def make_submission(folder: Path, work: str, amount: float) -> Path:
    """A submission folder whose meta_fit sleeps `amount` s or does `amount` matmuls."""
    folder.mkdir(parents=True, exist_ok=True)
    code = MODEL.replace("__WORK__", repr(work)).replace("__AMOUNT__", repr(amount))
    (folder / "model.py").write_text(code)
    return folder


def zip_submission(folder: Path) -> Path:
    from submission_api.submission_zip import build_submission_zip

    return build_submission_zip(folder, folder.with_suffix(".zip"))


class DockerEvents:
    """Container create/start/die/destroy stamps (epoch s) by container name, from the engine's
    event stream; only containers whose mounts lie under `root` (ours, not those of other
    platforms running on the same engine with the same run ids)."""

    def __init__(self, root: Path) -> None:
        import docker

        self.client = docker.from_env()
        self.root = str(root.resolve())
        self.stamps: dict[str, dict[str, float]] = {}
        self._ours: dict[str, bool] = {}
        self._stream = self.client.events(decode=True, filters={"type": "container"})
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()

    def _is_ours(self, container_id: str) -> bool:
        if container_id not in self._ours:
            try:
                mounts = self.client.api.inspect_container(container_id)["Mounts"]
                self._ours[container_id] = any(m.get("Source", "").startswith(self.root)
                                               for m in mounts)
            except Exception:  # noqa: BLE001 - gone already: not one we saw created
                self._ours[container_id] = False
        return self._ours[container_id]

    def _pump(self) -> None:
        try:
            for event in self._stream:
                name = event.get("Actor", {}).get("Attributes", {}).get("name", "")
                if name.startswith("arena-") and "-run-" in name and self._is_ours(
                        event["Actor"]["ID"]):
                    action = event.get("Action", event.get("status", ""))
                    self.stamps.setdefault(name, {})[action] = event["timeNano"] / 1e9
        except Exception:  # noqa: BLE001 - closed at the end
            return

    def for_run(self, run_id: int) -> dict[str, float]:
        found = [s for n, s in self.stamps.items() if f"-run-{run_id}-" in n]
        return found[-1] if found else {}

    def close(self) -> None:
        self._stream.close()


def compare_exit_detection(root: Path, rounds: int) -> None:
    """The sandbox driver alone, in this process: from the container's exit (engine event) to
    `run_sandbox` returning, with exit detection by polling only (before) and by a blocking
    wait (now), in alternating rounds."""
    from unittest import mock

    import docker
    import worker.sandbox as sandbox
    from worker.sandbox_config import SandboxLimits, SandboxSpec

    client = docker.from_env()
    events = DockerEvents(root)
    polled = lambda container: threading.Event()  # noqa: E731 - never set: polling only
    samples: dict[str, list[float]] = {"poll only (before)": [], "wait + poll (now)": []}
    try:
        for i in range(rounds):
            for label in samples:
                work = Path(tempfile.mkdtemp(prefix="drv-", dir=root))
                os.chmod(work, 0o755)
                name = f"arena-bench-run-{900000 + i}-0-{uuid.uuid4().hex[:8]}"
                spec = SandboxSpec(image=SANDBOX_IMAGE, command=("python3", "-c", "pass"),
                                   submission_dir=work, bundle_dir=work,
                                   output_dir=work / "out", name=name)
                patch = (mock.patch.object(sandbox, "_watch_exit", polled)
                         if label.startswith("poll") else nullcontext())
                with patch:
                    sandbox.run_sandbox(client, spec, SandboxLimits(cpus=1, memory_mb=512,
                                                                    wall_time_s=60))
                returned = time.time()
                die = wait_until(lambda n=name: events.stamps.get(n, {}).get("die"), 10,
                                 "the die event", 0.05)
                samples[label].append((returned - die) * 1000)
    finally:
        events.close()
    print(f"\nsandbox driver, container exit -> run_sandbox returned (ms, {rounds} rounds)")
    for label, values in samples.items():
        print(f"  {label:<24} median {statistics.median(values):6.0f}  "
              f"[{min(values):.0f}..{max(values):.0f}]")
    before, now = (statistics.median(v) for v in samples.values())
    print(f"  before/now {before / max(now, 1e-3):.2f}x")


def parse_marks(log: str) -> dict[str, float]:
    marks = {}
    for line in log.splitlines():
        if line.startswith("ARENA-T "):
            _, what, stamp = line.split()[:3]
            marks[what] = float(stamp)
    return marks


# --- the two ways of running --------------------------------------------------------------------
PROTOCOL = {"name": "cross-domain", "tasks_per_dataset": 3}


@dataclass
class Timing:
    kind: str
    wall_s: float
    segments: dict[str, float] = field(default_factory=dict)
    meta_fit_s: float = 0.0


def run_direct(submission: Path, collection: Path, cache: Path, out: Path) -> Timing:
    """(a) `arena run` in this process (the participant side in a subprocess, as it does)."""
    from submission_api.protocols import ProtocolParams
    from submission_api.runner.local import run_local

    start = time.time()
    result = run_local(submission, collection, out, protocol=ProtocolParams.from_dict(PROTOCOL),
                       seed=0, phase_seed=0, threads=1, cache_dir=cache)
    end = time.time()
    assert result.state == "finished", result.message
    marks = parse_marks((out / "stdout.txt").read_text())
    return Timing("direct", end - start, {
        "start -> model imported": marks["import"] - start,
        "meta_fit end -> scored": end - marks["meta_fit.end"]},
        marks["meta_fit.end"] - marks["meta_fit.start"])


def run_platform(platform: BenchPlatform, phase_id: int, archive: Path, events: DockerEvents,
                 worker: str = "w1") -> Timing:
    """(b) upload, worker, sandbox, scoring, leaderboard; the segments of its fixed costs."""
    token = platform.create_user(f"u{uuid.uuid4().hex[:8]}")
    before_logs = len(platform.worker_events(worker))
    t_upload = time.time()
    submission_id = platform.submit(token, phase_id, archive)
    t_queued = time.time()
    sub = wait_until(lambda: platform.submission(token, submission_id), 5, "the submission")
    run_id = sub["runs"][0]["id"]
    wait_until(lambda: "die" in events.for_run(run_id), 900, "the container to exit", 0.1)
    with httpx.Client(base_url=platform.base_url, timeout=30,
                      headers={"Authorization": f"Bearer {token}"}) as client:
        url = f"/api/v1/phases/{phase_id}/leaderboard"
        for i in range(30_000):  # bounded: 30,000 polls of >= 20 ms = 10 min at least
            board = client.get(url).json()
            if any(e["submission_id"] == submission_id for e in board["entries"]):
                break
            if i % 50 == 49:
                sub = platform.submission(token, submission_id)
                assert sub["state"] in ("running", "queued", "finished"), sub
            time.sleep(0.02)
    t_board = time.time()
    wait_until(lambda: "destroy" in events.for_run(run_id), 30, "the container's removal", 0.05)
    server = platform.run_times(submission_id)
    docker_t = events.for_run(run_id)
    with platform.api(token) as api:
        log = api.get(f"/api/v1/submissions/{submission_id}/logs").json()["runs"][0]["log"]
    marks = parse_marks(log)
    wlog = {e: t for t, e, f in platform.worker_events(worker)[before_logs:]
            if e not in ("run.sandbox.started",) or "container" not in f}
    seg = {
        "upload -> queued (POST answered)": t_queued - t_upload,
        "queued -> claimed (broker + claim)": server["claimed"] - t_queued,
        "claimed -> prepare.started (fetch)": wlog["run.prepare.started"] - server["claimed"],
        "prepare.started -> sandbox (prepare)": wlog["run.sandbox.started"]
                                                - wlog["run.prepare.started"],
        "sandbox -> container created": docker_t["create"] - wlog["run.sandbox.started"],
        "container created -> started": docker_t["start"] - docker_t["create"],
        "container started -> model imported": marks["import"] - docker_t["start"],
        "meta_fit end -> container exit": docker_t["die"] - marks["meta_fit.end"],
        "container exit -> removed": docker_t["destroy"] - docker_t["die"],
        "removed -> sandbox.finished": wlog["run.sandbox.finished"] - docker_t["destroy"],
        "sandbox.finished -> finish stored": server["finished"] - wlog["run.sandbox.finished"],
        "finish stored -> on leaderboard": t_board - server["finished"],
    }
    seg["= queued -> container running"] = docker_t["start"] - t_queued
    seg["= container exit -> on leaderboard"] = t_board - docker_t["die"]
    return Timing("platform", t_board - t_upload, seg,
                  marks["meta_fit.end"] - marks["meta_fit.start"])


def calibrate_matmuls(seconds: float) -> int:
    """How many of the model's matmuls take about `seconds` here, single-threaded."""
    import torch

    torch.set_num_threads(1)
    a, n, start = torch.ones(256, 256), 0, time.perf_counter()
    while time.perf_counter() - start < 2.0:
        a = torch.tanh(a @ a * 1e-3)
        n += 1
    return int(n * seconds / (time.perf_counter() - start))


def print_segments(timings: list[Timing], title: str) -> None:
    print(f"\n{title} (ms; median [min..max] over {len(timings)} runs)")
    for name in timings[0].segments:
        values = [t.segments[name] * 1000 for t in timings]
        print(f"  {name:<40} {statistics.median(values):>8.0f}  "
              f"[{min(values):.0f}..{max(values):.0f}]")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=55.0, help="meta_fit duration")
    parser.add_argument("--pairs", type=int, default=2, help="(a)/(b) pairs of the long run")
    parser.add_argument("--short", type=int, default=3, help="extra (b) runs of a 0 s meta_fit")
    parser.add_argument("--work", choices=("sleep", "compute"), default="sleep")
    parser.add_argument("--driver-rounds", type=int, default=6,
                        help="rounds of the exit-detection comparison (0: skip)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        root = Path(tmp)
        os.chmod(root, 0o755)
        collection, cache = make_collection(root)
        amount = args.seconds if args.work == "sleep" else calibrate_matmuls(args.seconds)
        long_dir = make_submission(root / "long", args.work, amount)
        short_dir = make_submission(root / "short", "sleep", 0.0)
        long_zip, short_zip = zip_submission(long_dir), zip_submission(short_dir)
        print(f"meta_fit: {args.work} {amount}; protocol {PROTOCOL}; 1 worker, 1 CPU sandbox")
        with bench_platform(root / "platform") as platform:
            organizer = platform.create_user("organizer", "organizer")
            data = platform.register_collection(collection, cache)
            phase_id = platform.create_phase(organizer, data, protocol=PROTOCOL,
                                             time_limit_s=int(args.seconds * 3 + 120),
                                             resources={"cpus": 1, "memory_mb": 2048, "gpus": 0})
            platform.start_worker("w1")
            events = DockerEvents(root)
            try:
                cold = run_platform(platform, phase_id, short_zip, events)
                print_segments([cold], "cold worker: first run (datasets fetched, imports)")
                shorts = [run_platform(platform, phase_id, short_zip, events)
                          for _ in range(args.short)]
                if shorts:
                    print_segments(shorts, "warm worker, 0 s meta_fit")
                direct, plat = [], []
                for i in range(args.pairs):
                    order = ("a", "b") if i % 2 == 0 else ("b", "a")
                    for which in order:
                        if which == "a":
                            direct.append(run_direct(long_dir, collection, cache,
                                                     root / f"local-{i}"))
                        else:
                            plat.append(run_platform(platform, phase_id, long_zip, events))
                print_segments(plat, f"warm worker, {args.work} meta_fit ~{args.seconds:g} s")
                print_segments(direct, "arena run (direct), same submission")
            finally:
                events.close()
        if args.driver_rounds:
            compare_exit_detection(root, args.driver_rounds)
        print(f"\n{'pair':<6}{'(a) direct s':>14}{'(b) platform s':>16}{'(b)/(a)':>10}"
              f"{'meta_fit a/b s':>18}")
        for i, (a, b) in enumerate(zip(direct, plat, strict=True)):
            print(f"{i:<6}{a.wall_s:>14.2f}{b.wall_s:>16.2f}{b.wall_s / a.wall_s:>10.3f}"
                  f"{a.meta_fit_s:>9.1f}/{b.meta_fit_s:.1f}")
        ratios = [b.wall_s / a.wall_s for a, b in zip(direct, plat, strict=True)]
        extra = [(b.wall_s - b.meta_fit_s) - (a.wall_s - a.meta_fit_s)
                 for a, b in zip(direct, plat, strict=True)]
        print(f"(b)/(a) median {statistics.median(ratios):.3f} (aim <= 1.10); platform's extra "
              f"fixed cost over arena run: {statistics.median(extra) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
