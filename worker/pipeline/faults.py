"""Which errors are the platform's: the closed list of infrastructure faults, and the host check.

Verdicts are decided where the error arises (issue 21): what the participant produced ends in
their verdict inside the pipeline; what is left is either a named infrastructure fault
(released, retried with backoff, never charged: `is_platform_fault`) or a bug (ended once,
uncharged, logged loudly; the server charges a participant's 4th in 24 h). A worker whose own
disk is full, or whose Docker engine does not answer, does not claim at all (`check_host`): it
tells the server why (shown on the workers page) and its Celery task retries the job later.
"""

from __future__ import annotations

import errno
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from submission_api.contract.reasons import INTERNAL_ERROR_FLAG as INTERNAL_ERROR_FLAG
from submission_api.contract.reasons import FailureReason
from worker.client import ServerRejectedError, ServerUnavailableError
from worker.pipeline.errors import PlatformFault
from worker.sandbox_result import SandboxPlatformError

log = logging.getLogger(__name__)

PHASE_ERROR = FailureReason.PLATFORM_ERROR.value
"""The server's reason for failures never charged to the participant."""
PLATFORM_ERRORS = (PlatformFault, SandboxPlatformError, ServerUnavailableError,
                   ServerRejectedError)
"""Named infrastructure faults: released, never charged."""
HOST_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.ENOMEM,
                         errno.EMFILE, errno.ENFILE, errno.ECONNREFUSED, errno.ECONNRESET,
                         errno.ETIMEDOUT, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EPIPE})
"""An OSError with one of these is the host's resources failing, a platform fault; any other
OSError (a name too long, a bad encoding, a loop of links) came from what the run was given."""
ENGINE_CLIENT_MODULES = frozenset({"docker", "requests", "urllib3"})


def is_platform_fault(exc: BaseException) -> bool:
    """Whether `exc` is one of the closed list of infrastructure faults (released, uncharged)."""
    if isinstance(exc, PLATFORM_ERRORS):
        return True
    # The engine's client libraries (an unreachable or failing Docker engine) name their errors
    # by module; they never carry what participant code produced.
    if type(exc).__module__.split(".")[0] in ENGINE_CLIENT_MODULES:
        return True
    return isinstance(exc, OSError) and exc.errno in HOST_ERRNOS


class HostUnhealthyError(ServerUnavailableError):
    """This worker's own resources are failing: it does not claim, and the job is retried
    later (re-published, so a healthy worker may take it first)."""


EngineCheck = Callable[[], None]
"""Raises when the worker's sandbox engine does not answer (`wiring.make_engine_check`)."""


def check_host(folders: tuple[Path, ...], min_free_bytes: int, worker_name: str,
               engine_check: EngineCheck | None = None) -> None:
    """Raise HostUnhealthyError when a folder this worker writes runs into is (nearly) full,
    or when its sandbox engine (`engine_check`, Docker executor only) does not answer."""
    for folder in folders:
        probe = folder if folder.exists() else folder.parent
        try:
            free = shutil.disk_usage(probe).free
        except OSError as exc:
            raise HostUnhealthyError(f"worker {worker_name!r} cannot read its folder "
                                     f"{folder}: {exc}; fix the host") from exc
        if free < min_free_bytes:
            log.error("worker.unhealthy", extra={"worker": worker_name, "folder": str(folder),
                                                 "free_bytes": free})
            raise HostUnhealthyError(
                f"worker {worker_name!r} has {free} bytes free under {folder}, below its "
                f"{min_free_bytes}; it claims no run until space is freed")
    if engine_check is None:
        return
    try:
        engine_check()
    except Exception as exc:  # noqa: BLE001 - any failure to answer is the engine's
        log.error("worker.unhealthy", extra={"worker": worker_name, "engine": repr(exc)[:500]})
        raise HostUnhealthyError(
            f"worker {worker_name!r} cannot reach its Docker engine ({type(exc).__name__}: "
            f"{str(exc)[:300]}); it claims no run until the engine answers "
            "(scripts/ensure_docker.sh)") from exc
