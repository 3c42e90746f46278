"""The Celery job `arena.evaluate_run`: a thin wrapper over `worker.pipeline.evaluate`.

The job's arguments are ids (the run id and its bearer token); everything else is claimed from
the server. The only error retried here is `ServerUnavailableError` from the claim, when nothing
is held yet; every later fault is handled inside the pipeline (released to the server), so the
job returns normally and Celery never runs a claimed run twice by itself.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from billiard.process import current_process
from celery import shared_task

from worker.celery_app import EVALUATE_RUN
from worker.client import RunId, ServerUnavailableError
from worker.pipeline.evaluate import Runtime, evaluate_run
from worker.pipeline.wiring import build_runtime
from worker.settings import get_settings
from worker.shutdown import arm_stop_signal

log = logging.getLogger(__name__)

CLAIM_BACKOFF_S = 10.0
CLAIM_BACKOFF_MAX_S = 600.0


@lru_cache(maxsize=1)
def get_runtime() -> Runtime:
    """This pool process's runtime, built on its first job (after the fork)."""
    slot = getattr(current_process(), "index", None) or 0
    return build_runtime(get_settings(), slot)


def compute_claim_backoff(retries: int, first_s: float = CLAIM_BACKOFF_S) -> float:
    """Seconds before retrying a job whose claim could not reach the server (`first_s`:
    `WorkerSettings.claim_backoff_s`)."""
    return min(CLAIM_BACKOFF_MAX_S, first_s * 2**retries)


@shared_task(name=EVALUATE_RUN, bind=True, acks_late=True, reject_on_worker_lost=True,
             ignore_result=True)
def evaluate_run_job(self, run_id: RunId, run_token: str) -> None:  # noqa: ANN001 - Celery's
    """Evaluate one run; see `worker.pipeline.evaluate.evaluate_run`."""
    arm_stop_signal()  # a second Ctrl-C (or SIGTERM) releases the run (worker.shutdown)
    try:
        result = evaluate_run(run_id, run_token, get_runtime())
    except ServerUnavailableError as exc:
        retries = self.request.retries
        log.warning("run.claim.unreachable", extra={"run_id": run_id, "retries": retries})
        settings = get_settings()
        raise self.retry(exc=exc, countdown=compute_claim_backoff(retries,
                                                                 settings.claim_backoff_s),
                         max_retries=settings.claim_retries) from exc
    log.info("run.job.done", extra={"run_id": run_id, "result": str(result)})
