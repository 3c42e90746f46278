"""Publish step: the run's last word to the server, fenced by the claim's token.

`finish` writes a verdict (a participant's result or failure); `release` hands the run back
after a platform fault (re-queued, never charged). Both are fenced: when the server answers 409
someone newer owns the run, nothing was written, and that is the end of it. A server that stays
unreachable is logged, not raised: the lease then expires and the server's reconciler takes over,
which is safer than letting Celery run the job twice.
"""

from __future__ import annotations

import logging

from submission_api.contract.caps import FAULT_CAP, MESSAGE_CAP
from worker.client import ClaimedRun, InternalClient, ServerRejectedError, ServerUnavailableError
from worker.pipeline.score import Outcome

log = logging.getLogger(__name__)

ERROR_CAP = FAULT_CAP
DETAIL_CAP = MESSAGE_CAP


def publish_outcome(client: InternalClient, claimed: ClaimedRun, run_token: str,
                    outcome: Outcome) -> bool:
    """POST finish; True when the server stored it, False when fenced out or unreachable."""
    fields = {"run_id": claimed.run_id, "state": outcome.state, "reason": outcome.reason}
    try:
        stored = client.finish(claimed.run_id, run_token,
                               outcome.to_finish_body(claimed.fencing_token))
    except (ServerUnavailableError, ServerRejectedError) as exc:
        log.error("run.finish.failed", extra={**fields, "error": str(exc)})
        return False
    log.info("run.finish.stored" if stored else "run.finish.stale", extra=fields)
    return stored


def release_run(client: InternalClient, claimed: ClaimedRun, run_token: str, error: str,
                detail: str | None = None) -> bool:
    """POST release after a platform fault; True when the server re-queued the run.

    `error` is the short cause shown on the run; `detail` goes to the operators only.
    """
    fields = {"run_id": claimed.run_id, "error": error[:ERROR_CAP]}
    try:
        released = client.release(claimed.run_id, run_token, claimed.fencing_token,
                                  error[:ERROR_CAP],
                                  None if detail is None else detail[:DETAIL_CAP])
    except (ServerUnavailableError, ServerRejectedError) as exc:
        log.error("run.release.failed", extra={**fields, "release_error": str(exc)})
        return False
    log.warning("run.released" if released else "run.release.stale", extra=fields)
    return released
