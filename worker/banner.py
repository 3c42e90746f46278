"""What a worker says when it starts, and the start-up checks that end it with one line.

The banner names the executor (WARNING, loudly, when runs would execute unsandboxed), the
sandbox images its engine holds, the server, the broker (password masked) and the queues, so
an operator reading the first lines of the log knows what this worker will do. A worker told
`ARENA_WORKER_EXECUTOR=docker` whose engine does not answer stops here with the fix, instead
of starting, taking runs and failing each (they would wait `queued` with the reason only in
this log). The noise that buried all that is demoted: kombu's "No hostname was supplied" (the
filesystem broker has none, by design) and Celery's superuser warning (the worker runs as root
in the compose image to drive Docker; participant code never does, it runs in the sandbox).
"""

from __future__ import annotations

import logging
import os
import re
import warnings
from dataclasses import dataclass
from typing import Any

from worker.settings import WorkerSettings

log = logging.getLogger("worker.banner")

UNSANDBOXED = ("runs execute UNSANDBOXED in this worker's own Python: submissions can read and "
               "change anything this user can — for trusted code only (no Docker engine "
               "answers; start one, or set ARENA_WORKER_EXECUTOR=docker to refuse to start "
               "without it)")


POOL_BROKER = "none: a pool worker takes its jobs from the server over HTTP"


class StartupError(RuntimeError):
    """The worker cannot start as configured; the message is one line with the fix."""


@dataclass(frozen=True)
class Startup:
    """What the checks found: the executor runs will use and the images the engine holds."""

    executor: str  # "docker" or "local"
    images: list[str]


def mask_url(url: str) -> str:
    """`redis://:secret@host:6379/1` -> `redis://:***@host:6379/1` (nothing else changes)."""
    return re.sub(r"(//[^/@:]*:)[^@/]+@", r"\1***@", url)


def check_startup(settings: WorkerSettings, docker_client: Any | None) -> Startup:
    """The executor this worker will use, given the engine that answered (or None).

    Raises:
        StartupError: `executor="docker"` and no engine answers, or the pool's slots need
            more cores than the host has (`worker.cpu_plan`)."""
    from worker.cpu_plan import check_cpu_plan

    try:
        check_cpu_plan(settings)
    except ValueError as exc:
        raise StartupError(str(exc)) from None
    if settings.executor == "local":
        return Startup("local", [])
    if docker_client is None:
        if settings.executor == "docker":
            raise StartupError(
                "ARENA_WORKER_EXECUTOR=docker but no Docker engine answers (is dockerd "
                "running, and may this user use /var/run/docker.sock?); start it "
                "(scripts/ensure_docker.sh) or set ARENA_WORKER_EXECUTOR=auto")
        return Startup("local", [])
    try:
        images = sorted({tag for image in docker_client.images.list() for tag in image.tags})
    except Exception:  # noqa: BLE001 - the list is informative; runs report it again
        images = []
    return Startup("docker", images)


def log_banner(settings: WorkerSettings, startup: Startup) -> None:
    """The start-up lines: executor, images, server, broker, queues, pool."""
    if startup.executor == "local":
        log.warning("worker.unsandboxed %s", UNSANDBOXED,
                    extra={"executor_setting": settings.executor})
    else:
        wanted = settings.default_image
        log.info("worker.executor docker sandbox", extra={
            "images": startup.images[:20], "default_image": wanted,
            "default_image_present": wanted in startup.images})
        if wanted not in startup.images:
            log.warning("worker.image.missing the default sandbox image %s is not in this "
                        "engine; build it (scripts/build_sandbox_image.sh) or set "
                        "ARENA_WORKER_DEFAULT_IMAGE", wanted)
    log.info("worker.ready", extra={
        "worker": settings.name, "instance": os.environ.get("ARENA_WORKER_INSTANCE", ""),
        "server": settings.server_url,
        "broker": POOL_BROKER if settings.pool_token else mask_url(settings.broker_url),
        "queues": [] if settings.pool_token else settings.queues,
        "slots": settings.pool_size, "gpus": settings.gpu_ids or "none"})


def quiet_known_noise() -> None:
    """Demote the start-up noise named in the module docstring (it is not the operator's)."""
    logging.getLogger("kombu.connection").setLevel(logging.ERROR)
    # One INFO line per HTTP call to the server (heartbeats every few seconds) would bury the
    # run.* lines now that the pool children log at INFO; failures still say so (WARNING).
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # Celery's INFO lines for a received or finished job print its arguments: the run token.
    for name in ("celery.worker.strategy", "celery.app.trace"):
        logging.getLogger(name).setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", message=r"(?s).*running the worker with superuser")
