"""The rehearsal's worker pool (issue 37): the organizer's own worker, started as
docs/worker-pools.md ("Bring your own workers", step 3) tells an organizer to start it, and a
watch that records which worker held each run while the final is evaluated. Importable by name
(tests/e2e has no __init__)."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from platform_support import TLS
from rehearsal_support import ARENA

POOL_NAME, POOL_WORKER = "lab-gpus", "lab-gpu-1"
WORKER_ENV: dict[str, str] = {}
"""What every worker of the rehearsal adds to the platform's: nothing. The rehearsal is the
whole-competition check the other issues extend, so its workers run the product's defaults,
the 1 GB image pre-fault before a slot's first run included (5-7 s a process at load 35), though
no check here measures the page cache (tests/e2e/test_task_isolation_platform.py does)."""
TOKEN_LINE = re.compile(r"^(arena_pool_\S+)$", re.M)


def pool_token_of(stdout: str) -> str:
    """The credential `arena pool create` prints alone on standard output."""
    found = TOKEN_LINE.findall(stdout)
    assert len(found) == 1, f"no single credential line on stdout: {stdout!r}"
    return found[0]


def start_pool_worker(root: Path, server_url: str, token: str) -> subprocess.Popen:
    """`arena worker --pool-token TOKEN` with the documented environment and nothing of the
    test's own (no ARENA_* variable leaks in: no broker URL, no database), in a home of its
    own (the worker's data folder is the default one under it). Three additions a test needs:
    this host has no GPU, so two slots (ARENA_WORKER_CONCURRENCY) stand for
    ARENA_WORKER_GPU_IDS='["0","1"]'; the test server's leases last 15 s (a deployment's
    default is longer), so heartbeats come every 3 s, and idle polls every 1 s (`WORKER_ENV`
    adds nothing: the product's defaults)."""
    home = root / f"home-{POOL_WORKER}"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARENA_")} | {
        "HOME": str(home), "ARENA_WORKER_SERVER_URL": server_url,
        "ARENA_WORKER_EXECUTOR": "docker", "ARENA_WORKER_NAME": POOL_WORKER,
        "ARENA_WORKER_CONCURRENCY": "2", "ARENA_WORKER_HEARTBEAT_INTERVAL_S": "3",
        "ARENA_WORKER_POOL_POLL_S": "1", **WORKER_ENV}
    log = (root / f"worker-{POOL_WORKER}.log").open("ab")
    return subprocess.Popen([str(ARENA), "worker", "--pool-token", token], env=env,
                            stdout=log, stderr=log, start_new_session=True)


def stop_pool_worker(process: subprocess.Popen | None) -> None:
    """SIGTERM (its runs go back to the queue), then SIGKILL to what is left of its group."""
    if process is None:
        return
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=60)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # slots that outlived their parent
    if process.poll() is None:
        process.wait(timeout=30)


@dataclass
class HeldRuns:
    """Polls, as the organizer, in a thread: the pool's page (which of its workers held which
    run) and the queue view (each running run's lease owner, whoever holds it)."""

    base_url: str
    organizer_token: str
    pool_id: int
    by_pool_worker: dict[int, set[str]] = field(default_factory=dict)
    owners: dict[int, set[str]] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> HeldRuns:
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _watch(self) -> None:
        with httpx.Client(base_url=self.base_url, timeout=30, verify=TLS) as http:
            while not self._stop.wait(1.0):
                try:
                    self._look(http)
                except httpx.HTTPError:
                    continue  # a slow answer on a loaded host: look again

    def _look(self, http: httpx.Client) -> None:
        organizer = {"Authorization": f"Bearer {self.organizer_token}"}
        detail = http.get(f"/api/v1/pools/{self.pool_id}", headers=organizer)
        for worker in detail.raise_for_status().json()["workers"]:
            if worker.get("current_run_id"):
                self.by_pool_worker.setdefault(worker["current_run_id"], set()).add(
                    worker["name"])
        for entry in http.get("/api/v1/queue", headers=organizer).raise_for_status().json():
            if entry.get("worker"):
                self.owners.setdefault(entry["run_id"], set()).add(entry["worker"])
