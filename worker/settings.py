"""The worker's one settings class: every knob an operator may turn, read from `ARENA_WORKER_*`.

Nothing else in `worker/` reads the environment. Settings are built once at start-up
(`get_settings`) and passed to the factories that build the Celery app, the HTTP client and
the executor, so tests build their own with explicit values.
"""

from __future__ import annotations

import socket
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_QUEUE = "arena"
"""The server's default queue (server/core/config.py `default_queue`)."""


class WorkerSettings(BaseSettings):
    """Configuration of one worker host (a Celery worker process and its pool)."""

    model_config = SettingsConfigDict(env_prefix="ARENA_WORKER_", extra="ignore")

    name: str = Field(default_factory=socket.gethostname)
    """Sent with every claim, so the server can tell a redelivery to this worker apart."""
    server_url: str = "http://127.0.0.1:8000"
    broker_url: str = "redis://127.0.0.1:6379/0"
    """`redis://...` for a deployment (the very URL the server's ARENA_BROKER_URL names, database
    number included), `filesystem://` for the one-machine embedded default."""
    data_dir: Path = Path.home() / ".arena" / "worker"
    """Holds the download cache, per-run scratch folders and the filesystem broker's queue."""
    queues: list[str] = [DEFAULT_QUEUE]
    """Queues this worker consumes (per phase or per hardware class); the server names one."""
    gpu_ids: list[str] = []
    """GPUs this host owns; one concurrent run per GPU, each pool slot pinned to one."""
    concurrency: int = Field(default=1, ge=1)
    """Concurrent runs on a host without GPUs (ignored when `gpu_ids` is set)."""
    cpus_per_slot: int = Field(default=0, ge=0)
    """Host cores pinned to each pool slot (`--cpuset-cpus`; slot i gets the i-th group of
    `host_cpus`); 0: no pinning. The worker refuses to start when the slots need more cores
    than the host has (worker/cpu_plan.py)."""
    host_cpus: list[int] = []
    """The cores this worker may give its slots; empty: every core this process may run on."""
    wall_backstop_factor: float = Field(default=3.0, ge=1.0)
    """A run is charged CPU time and a wall clock that stops while the host starves it; its plain
    wall clock is cut at the phase's limit times this, as the host's fault (issue 38.3)."""
    max_time_limit_s: float = Field(default=6 * 3600, gt=0)
    """The longest wall-clock limit of any phase this worker may serve."""
    visibility_margin_s: float = Field(default=3600, gt=0)
    """Added to `max_time_limit_s` for fetch/prepare/score before Redis redelivers a message."""
    heartbeat_interval_s: float = Field(default=30.0, gt=0)
    http_timeout_s: float = Field(default=60.0, gt=0)
    http_attempts: int = Field(default=5, ge=1)
    http_backoff_s: float = Field(default=1.0, ge=0)
    """First pause between attempts; doubled on each retry."""
    claim_retries: int = Field(default=5, ge=0)
    """Celery retries of a job whose claim could not reach the server."""
    claim_backoff_s: float = Field(default=10.0, gt=0)
    """First pause before such a job (or one this host was too unhealthy to claim: a full disk)
    is tried again; doubled on each retry, at most 600 s."""
    default_image: str = "metadl-arena/sandbox:cpu"
    """Sandbox image for phases that name none (scripts/build_sandbox_image.sh builds it)."""
    executor: Literal["auto", "docker", "local"] = "auto"
    """`auto`: Docker when an engine answers, else the unsandboxed local mode (trusted code)."""
    log_cap_bytes: int = Field(default=64 * 1024, ge=1024)
    """Bytes kept of each of stdout and stderr for the run log."""
    sandbox_code_dir: Path | None = None
    """Where the Docker engine finds `submission_api` to mount into sandboxes. Unset: this
    worker's own copy (a worker on the host). A worker in a container sets a folder shared with
    the host at the same path; the worker copies its `submission_api` there at start."""
    reset_dentries: bool = True
    """Before each run, drop the host kernel's unused dentries and inodes (`drop_caches` 2) so
    no run reads names an earlier run looked up (issue 34; worker/dentry_reset.py). Needs root
    on the host with /proc/sys writable; without it the worker warns and records each run as
    not reset. Runs overlapping in concurrent slots are not separated by it."""
    prefault: bool = True
    """Before each run, read the sandbox image (again only when the host reclaimed pages since
    its last read), the run's data and the platform's code into the page cache, so that no run
    can leave bits in which of their pages are resident (issue 34; worker/prefault.py). Off
    only where no run's isolation matters (test platforms that measure none): reading the
    1 GB image took 8-12 s a run on a loaded host."""
    host_lock: Path | None = None
    """The host-wide lock every run holds (shared; a secret phase's run exclusively: it runs
    alone on the host; worker/host_lock.py). Unset: `data_dir/host.lock`; several workers on
    one host name one path."""
    pool_token: str | None = None
    """An organizer pool's credential (`arena_pool_...`): the worker then takes its jobs from the
    server over HTTP (`worker.pool_loop`), only that pool's, and needs no broker URL."""
    pool_poll_s: float = Field(default=5.0, gt=0)
    """Seconds between job requests of an idle pool worker (each one is also its heartbeat)."""

    @field_validator("queues")
    @classmethod
    def _check_queues(cls, queues: list[str]) -> list[str]:
        if not queues or any(not q.strip() for q in queues):
            raise ValueError(f"queues must be non-empty names, got {queues!r}; "
                             f'set ARENA_WORKER_QUEUES to e.g. ["{DEFAULT_QUEUE}"]')
        return queues

    @property
    def cache_dir(self) -> Path:
        return self.data_dir / "cache"

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    @property
    def host_lock_path(self) -> Path:
        return self.host_lock or self.data_dir / "host.lock"

    @property
    def broker_dir(self) -> Path:
        return self.data_dir / "broker"

    @property
    def pool_size(self) -> int:
        return len(self.gpu_ids) if self.gpu_ids else self.concurrency

    @property
    def visibility_timeout_s(self) -> int:
        # a run may run to its wall-clock backstop, past the phase's limit
        return int(self.max_time_limit_s * self.wall_backstop_factor + self.visibility_margin_s)


@lru_cache(maxsize=1)
def get_settings() -> WorkerSettings:
    """The process-wide settings, read from the environment once."""
    return WorkerSettings()
