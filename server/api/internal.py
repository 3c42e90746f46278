"""The internal worker API, exactly as docs/internals.md pins it.

Workers hold no database credentials: each call carries the per-run bearer token the job was
enqueued with, and every state change is guarded by the run's fencing token (409, nothing
written, when stale). Answers: claim 200 ClaimedRun | 409; heartbeat 200 new expiry | 409;
finish 200 | 409; release 200 (back to queued, never charged) | 409. A run whose cancel was
requested answers its next heartbeat or finish with 409 `run.cancelled`, committed first.
Each call also records the worker (name from the claim, then the lease owner) for the status
view. The routes translate HTTP; `server.services.worker_calls` does each call's work and
commits.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import FileResponse
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from server.api.deps import (
    CallerPool,
    NowDep,
    RunAuth,
    SessionDep,
    SettingsDep,
    WriteSessionDep,
    bearer_token,
    get_lease_policy,
    get_queue,
    get_settings,
    get_storage,
    pool_credential,
)
from server.core.config import Settings
from server.core.errors import AuthRequiredError, NotFoundError
from server.core.security import hash_token
from server.domain.phase import rules_of
from server.models import ACTIVE_STATES, Dataset, Phase, Run, Submission
from server.schemas.competition import PhaseData
from server.schemas.internal import (
    ClaimedRun,
    ClaimRequest,
    FinishRequest,
    HeartbeatOut,
    HeartbeatRequest,
    ReleaseRequest,
    RunStateOut,
)
from server.schemas.pool import PoolJobOut, PoolJobRequest
from server.services import pool_jobs, worker_calls
from server.services import runs as run_service
from server.services.datasets import dataset_tar
from server.services.queue import JobQueue
from server.services.secrecy import test_data_level
from server.services.seeds import compute_participant_seed, compute_test_seed
from server.services.storage import Storage

# Every internal call is refused at once (401 `pool.revoked`) when it carries an unknown or
# revoked pool credential, whatever the route, routes added later included.
router = APIRouter(prefix="/internal", tags=["internal"], dependencies=[Depends(pool_credential)])
Policy = Annotated[run_service.LeasePolicy, Depends(get_lease_policy)]
_CONFLICT: dict[int | str, dict[str, Any]] = {
    409: {"description": "finished, leased by another worker, or stale fencing token"}}


@router.post("/runs/{run_id}/claim", response_model=ClaimedRun, responses=_CONFLICT)
def claim(run: RunAuth, body: ClaimRequest, session: WriteSessionDep, now: NowDep,
          policy: Policy, settings: SettingsDep, pool: CallerPool,
          queue: Annotated[JobQueue, Depends(get_queue)]) -> ClaimedRun:
    """Take the run's lease; everything the worker needs to evaluate it comes back. A worker
    whose own resources fail sends `unhealthy` instead: recorded, nothing claimed, 409. A run
    of a phase with secret test data goes only to a claim saying `host_lock` (the worker holds
    its host alone for it); another claim gets 409 `worker.no_host_lock`, and the run is
    offered again, after a pause, to the next worker."""
    claimed = worker_calls.claim(session, run.id, body.worker, body.gpus, body.images, now,
                                 policy, unhealthy=body.unhealthy, pool_id=pool,
                                 task_isolation=body.task_isolation, host_lock=body.host_lock,
                                 requeue=worker_calls.Requeue(queue, settings.default_queue))
    run, submission, phase = claimed.run, claimed.submission, claimed.phase
    data, rules = PhaseData.model_validate(phase.data or {}), rules_of(phase)
    return ClaimedRun(
        run_id=run.id, submission_id=submission.id, fencing_token=run.fencing_token,
        lease_expires_at=claimed.lease_expires_at, submission_sha256=submission.sha256,
        submission_size=submission.size_bytes, submission_root=submission.zip_root,
        phase_id=phase.id, protocol=rules.protocol.to_dict(),
        test_seed=compute_test_seed(settings.seed_secret_for(phase.id), phase.id, rules.seed),
        participant_seed=compute_participant_seed(run), run_index=run.index,
        time_limit_s=rules.time_limit_s, resources=rules.resources, image=phase.image,
        data=data,
        dataset_hashes=data.hashes(),
        exclusive_host=test_data_level(phase) == "secret",
    )


@router.get("/runs/{run_id}/submission", response_class=FileResponse)
def submission_zip(run: RunAuth, session: SessionDep, storage: Annotated[
        Storage, Depends(get_storage)]) -> FileResponse:
    """The submission zip of this run."""
    submission = session.get_one(Submission, run.submission_id)
    return FileResponse(storage.absolute(submission.storage_path), media_type="application/zip",
                        filename=f"submission-{submission.id}.zip")


@router.post("/runs/{run_id}/heartbeat", response_model=HeartbeatOut, responses=_CONFLICT)
def heartbeat(run: RunAuth, body: HeartbeatRequest, session: WriteSessionDep, now: NowDep,
              policy: Policy, pool: CallerPool) -> HeartbeatOut:
    expires = worker_calls.heartbeat(session, run, body, now, policy, pool_id=pool)
    return HeartbeatOut(lease_expires_at=expires)


@router.post("/runs/{run_id}/finish", response_model=RunStateOut, responses=_CONFLICT)
def finish(run: RunAuth, body: FinishRequest, session: WriteSessionDep, now: NowDep,
           policy: Policy, pool: CallerPool) -> RunStateOut:
    run = worker_calls.finish(session, run, body, now, policy, pool_id=pool)
    return RunStateOut(run_id=run.id, state=run.state)


@router.post("/runs/{run_id}/release", response_model=RunStateOut, responses=_CONFLICT)
def release(run: RunAuth, body: ReleaseRequest, session: WriteSessionDep, now: NowDep,
            policy: Policy, queue: Annotated[JobQueue, Depends(get_queue)],
            settings: Annotated[Settings, Depends(get_settings)],
            pool: CallerPool) -> RunStateOut:
    """A platform fault: back to queued with a fresh token (never charged), then re-enqueued
    after a back-off that doubles with each fault of the run."""
    released = worker_calls.release(session, run, body, now, policy, queue,
                                    settings.default_queue, pool_id=pool)
    return RunStateOut(run_id=run.id, state=released.state, requeued=released.requeued)


@router.get("/datasets/{content_hash}", response_class=FileResponse)
async def dataset(content_hash: str, request: Request, session: SessionDep,
                  storage: Annotated[Storage, Depends(get_storage)],
                  pool: CallerPool) -> FileResponse:
    """A tar of the compiled dataset entry, for a run (in progress) whose phase uses it."""
    token = bearer_token(request)
    run = session.execute(select(Run).where(
        Run.run_token_hash == hash_token(token or ""), Run.state.in_(ACTIVE_STATES))
    ).scalar_one_or_none()
    if token is None or run is None:
        raise AuthRequiredError("no valid run token for a claimed run; claim the run first")
    pool_jobs.check_run_access(session, run.id, pool)
    phase = session.execute(select(Phase).join(Submission, Submission.phase_id == Phase.id)
                            .where(Submission.id == run.submission_id)).scalar_one()
    row = session.execute(select(Dataset).where(Dataset.content_hash == content_hash)
                          ).scalar_one_or_none()
    if row is None or content_hash not in PhaseData.model_validate(phase.data or {}).hashes():
        raise NotFoundError(f"no dataset {content_hash} in the phase of run {run.id}")
    path = await run_in_threadpool(dataset_tar, storage, row)
    return FileResponse(path, media_type="application/x-tar", filename=f"{content_hash}.tar")


@router.post("/pool/jobs", response_model=PoolJobOut,
             responses={204: {"description": "nothing to do now; ask again later"}})
def pool_job(request: Request, body: PoolJobRequest, session: WriteSessionDep, now: NowDep,
             pool: CallerPool) -> PoolJobOut | Response:
    """A pool worker's next job: the oldest queued run of its pool's phases, with a fresh run
    token (then claim it as any worker does); 204 when there is none. Either way the call is
    the worker's heartbeat. Needs the pool credential (`X-Arena-Pool-Token`)."""
    token = request.headers.get(pool_jobs.POOL_HEADER)
    if pool is None or token is None:
        raise AuthRequiredError(f"a pool worker sends its pool credential in "
                                f"{pool_jobs.POOL_HEADER}; shared workers take jobs from the "
                                "broker")
    job = pool_jobs.next_job(session, pool, token, body.worker, body.host, body.gpus,
                             body.images, now, task_isolation=body.task_isolation,
                             host_lock=body.host_lock)
    if job is None:
        return Response(status_code=204)
    return PoolJobOut(run_id=job[0], run_token=job[1])
