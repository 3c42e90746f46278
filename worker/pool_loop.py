"""A pool worker: an organizer's worker that takes its pool's jobs from the server over HTTP.

Started by `arena worker --pool-token TOKEN` (or ARENA_WORKER_POOL_TOKEN). It has no broker URL:
each slot asks `POST /internal/pool/jobs` for a queued run of its pool's phases, the server
decides which (docs/internals.md; the contract of issue 37), and the run goes through the very
pipeline a Celery job runs (`worker.pipeline.evaluate.evaluate_run`), every call carrying the
pool header. Each answer, 204 included, is the slot's heartbeat on the workers page.

One process per slot, as Celery's prefork pool: a slot owns one GPU (`compute_slot_gpus`), and
SIGTERM in a slot raises `WorkerStopped` inside the run it evaluates, so the pipeline releases
it (requeued, never charged). The parent supervises:
- SIGTERM (systemd, `docker stop`) or a second Ctrl-C: each slot releases what it holds, then
  the worker exits 0;
- a first Ctrl-C: the slots take no new job and finish their runs;
- a revoked credential (401 `pool.revoked`): the slot that meets it exits `EXIT_REVOKED`, the
  others release what they hold (when the server still lets them) and the worker exits
  `EXIT_REVOKED` with one line saying what to do.
An idle slot asks again every `pool_poll_s`; an unreachable server is retried with a delay
that doubles up to `MAX_BACKOFF_S`.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from worker.client import (
    PoolJob,
    PoolRevokedError,
    ServerRejectedError,
    ServerUnavailableError,
)
from worker.settings import WorkerSettings

log = logging.getLogger("worker.pool")

EXIT_REVOKED = 3
MAX_BACKOFF_S = 30.0
"""Below the server's live window (3 heartbeats, 90 s): a slot backing off still shows live."""
REVOKED_MESSAGE = ("this worker's pool credential was revoked or is unknown (401 pool.revoked); "
                   "it took no new run and stopped. Ask the competition's organizer for a new "
                   "token (`arena pool token POOL`) and restart with --pool-token")


class Waiter(Protocol):
    """What a slot waits on between requests: set when it must stop taking jobs."""

    def is_set(self) -> bool: ...
    def wait(self, timeout: float | None = None) -> bool: ...


class JobSource(Protocol):
    pool_revoked: bool

    def request_job(self, worker: str, host: str, gpus: list[str],
                    images: list[str]) -> PoolJob | None: ...


@dataclass
class PoolLoop:
    """One slot's loop: ask for a job, evaluate it, repeat until told to stop or revoked."""

    client: JobSource
    evaluate: Callable[[int, str], object]
    worker: str
    host: str
    gpus: list[str]
    list_images: Callable[[], list[str] | None]
    poll_s: float
    stopping: Waiter
    max_backoff_s: float = MAX_BACKOFF_S

    def run(self) -> int:
        """Returns the slot's exit code: 0 when stopped, `EXIT_REVOKED` when revoked."""
        delay = self.poll_s
        while not self.stopping.is_set():
            try:
                job = self.client.request_job(self.worker, self.host, self.gpus,
                                              self.list_images() or [])
            except PoolRevokedError as exc:
                log.error("worker.pool.revoked %s", REVOKED_MESSAGE, extra={"error": str(exc)})
                return EXIT_REVOKED
            except (ServerUnavailableError, ServerRejectedError) as exc:
                log.warning("worker.pool.unreachable", extra={"error": str(exc)[:300],
                                                              "retry_in_s": delay})
                self.stopping.wait(delay)
                delay = min(self.max_backoff_s, delay * 2)
                continue
            delay = self.poll_s
            if job is None:
                self.stopping.wait(self.poll_s)
                continue
            try:
                result = self.evaluate(job.run_id, job.run_token)
            except ServerUnavailableError as exc:  # before the claim: nothing held
                log.warning("worker.pool.job.unclaimed", extra={"run_id": job.run_id,
                                                                "error": str(exc)[:300]})
                self.stopping.wait(self.poll_s)
                continue
            log.info("run.job.done", extra={"run_id": job.run_id, "result": str(result)})
            if self.client.pool_revoked:
                log.error("worker.pool.revoked %s", REVOKED_MESSAGE)
                return EXIT_REVOKED
        return 0


# --- one slot's process -------------------------------------------------------------------------
def run_slot(settings: WorkerSettings, slot: int, stopping: Any) -> None:
    """A slot process's body (after the fork: its own HTTP and Docker clients)."""
    from worker.pipeline.evaluate import evaluate_run
    from worker.pipeline.wiring import build_runtime, compute_slot_gpus, make_image_lister
    from worker.shutdown import WorkerStopped, stop_current_run

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what a Ctrl-C means
    signal.signal(signal.SIGTERM, stop_current_run)  # releases the run held (worker.shutdown)
    try:
        runtime = build_runtime(settings, slot)
        stop = _StopOnTerm(stopping)

        def evaluate(run_id: int, run_token: str) -> object:
            with stop.evaluating():
                return evaluate_run(run_id, run_token, runtime)

        loop = PoolLoop(
            client=runtime.client, evaluate=evaluate,
            worker=runtime.worker_name, host=socket.gethostname(),
            gpus=list(compute_slot_gpus(settings, slot)), list_images=make_image_lister(settings),
            poll_s=settings.pool_poll_s, stopping=stop)
        code = loop.run()
    except WorkerStopped:  # SIGTERM while idle: nothing held
        code = 0
    sys.exit(code)


class _StopOnTerm:
    """The shared stop event, also set by this process's own SIGTERM (a run it released ends the
    loop, not only the run).

    SIGTERM raises `WorkerStopped` only while a run is evaluated (`evaluating`), where the
    pipeline releases it. An idle slot is only marked: an exception raised at any bytecode of
    the shared Event's `wait` or `is_set` could leave its cross-process lock or its sleeper
    count held by a dead slot, and the parent's next `is_set` or `set` then blocks for ever
    (a worker that never exited after SIGTERM, seen under load)."""

    SLICE_S = 0.2
    """How soon an idle slot's wait notices its own SIGTERM."""

    def __init__(self, event: Any) -> None:
        self._event = event
        self._busy = False
        previous = signal.getsignal(signal.SIGTERM)

        def on_term(signum: int, frame: Any) -> None:
            self.terminated = True
            if self._busy and callable(previous):
                previous(signum, frame)

        self.terminated = False
        signal.signal(signal.SIGTERM, on_term)

    @contextmanager
    def evaluating(self) -> Iterator[None]:
        """While a run is evaluated, SIGTERM raises in it (and releases it); a SIGTERM already
        received stops the slot before it claims anything."""
        if self.terminated:
            from worker.shutdown import WorkerStopped

            raise WorkerStopped("the worker was stopped before this run was claimed")
        self._busy = True
        try:
            yield
        finally:
            self._busy = False

    def is_set(self) -> bool:
        return self.terminated or bool(self._event.is_set())

    def wait(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.terminated:
            left = self.SLICE_S if deadline is None else min(self.SLICE_S,
                                                             deadline - time.monotonic())
            if left <= 0:
                return False
            if self._event.wait(left):
                return True
        return True


# --- the parent ---------------------------------------------------------------------------------
class PoolSupervisor:
    """Starts one process per slot, restarts one that dies, and turns signals into stops."""

    def __init__(self, settings: WorkerSettings) -> None:
        self._settings = settings
        self._context = multiprocessing.get_context("fork")
        self._stopping = self._context.Event()
        self._interrupts = 0
        self._terminate = threading.Event()
        self._slots: dict[int, Any] = {}

    def run(self) -> int:
        signal.signal(signal.SIGINT, self._on_interrupt)
        signal.signal(signal.SIGTERM, self._on_terminate)
        for slot in range(self._settings.pool_size):
            self._start(slot)
        revoked = False
        while self._slots:
            for slot, process in list(self._slots.items()):
                if process.is_alive():
                    continue
                del self._slots[slot]
                if process.exitcode == EXIT_REVOKED:
                    revoked = True
                    self._stop_all(release=True)
                elif not self._stopping.is_set():
                    log.error("worker.pool.slot.died", extra={"slot": slot,
                                                              "exitcode": process.exitcode})
                    time.sleep(min(MAX_BACKOFF_S, self._settings.pool_poll_s))
                    self._start(slot)
            if self._terminate.is_set():
                self._terminate.clear()
                self._stop_all(release=True)
            time.sleep(0.2)
        if revoked:
            log.error("worker.pool.stopped %s", REVOKED_MESSAGE)
            return EXIT_REVOKED
        log.info("worker.pool.stopped")
        return 0

    def _start(self, slot: int) -> None:
        process = self._context.Process(target=run_slot, name=f"arena-slot-{slot}",
                                        args=(self._settings, slot, self._stopping))
        process.start()
        self._slots[slot] = process

    def _stop_all(self, *, release: bool) -> None:
        self._stopping.set()
        if release:
            for process in self._slots.values():
                if process.is_alive() and process.pid is not None:
                    process.terminate()  # SIGTERM: WorkerStopped in the run -> released

    def _on_interrupt(self, signum: int, frame: Any) -> None:
        from worker.shutdown import describe_stop, runs_in_progress

        self._interrupts += 1
        if self._interrupts == 1:
            self._stopping.set()
            log.warning("worker.stopping %s", describe_stop(
                runs_in_progress(self._settings.runs_dir), self._settings.max_time_limit_s))
        else:
            log.warning("worker.stopping.now runs in progress are released for another worker")
            self._terminate.set()

    def _on_terminate(self, signum: int, frame: Any) -> None:
        log.warning("worker.stopping.now runs in progress are released for another worker")
        self._terminate.set()


def run_pool_worker(settings: WorkerSettings) -> int:
    """What `arena worker --pool-token` runs; blocks until stopped and returns the exit code.

    Raises:
        StartupError: the worker cannot start as configured (one line with the fix)."""
    from worker.banner import check_startup, log_banner, quiet_known_noise
    from worker.log_format import configure_worker_logging
    from worker.pipeline.wiring import connect_docker, worker_instance
    from worker.sweep import sweep_at_start

    configure_worker_logging()
    worker_instance()  # chosen once here, before the slots fork: its lease-owner suffix
    quiet_known_noise()
    engine = connect_docker() if settings.executor != "local" else None
    log_banner(settings, check_startup(settings, engine))
    log.info("worker.pool.ready jobs come from the server over HTTP; no broker is used",
             extra={"server": settings.server_url, "slots": settings.pool_size,
                    "credential": (settings.pool_token or "")[:12]})
    runs_lock = sweep_at_start(settings)
    try:
        return PoolSupervisor(settings).run()
    finally:
        runs_lock.close()
