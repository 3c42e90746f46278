"""HTTP client for the server's internal API (docs/internals.md, "Platform: server <-> worker").

Workers hold no database credentials: this is their only channel to the source of truth. The
client owns the wire schema of a claimed run and the retry policy: connection errors and 5xx
answers are retried with exponential backoff (they are the platform's fault and usually pass);
a 409 or 401 is an answer, not an error (the run is done, someone else holds it, or its token
was rotated when it was re-enqueued: callers get `None` or `False`); any other 4xx is a bug and
raises `ServerRejectedError`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, model_validator

from submission_api.contract.resources import TIME_LIMIT_BOUND, RunResources
from submission_api.contract.wire import (
    UNHEALTHY_CAP,
    ClaimBody,
    HeartbeatBody,
    ReleaseBody,
    RunProgress,
)
from submission_api.storable_text import storable_json

log = logging.getLogger(__name__)

RunId = int
Resources = RunResources
"""A run's resources: the run contract's, with its one set of defaults and bounds."""


class ServerUnavailableError(Exception):
    """The server could not be reached or kept failing (5xx) after every retry: a platform fault."""


class ServerRejectedError(Exception):
    """The server refused a call with a 4xx other than 409 (bad token, unknown run)."""


class PoolRevokedError(Exception):
    """The worker's pool credential is unknown or revoked (401 `pool.revoked`): it must stop."""


POOL_HEADER = "X-Arena-Pool-Token"
"""The pool credential's header, sent on every internal call of a pool worker (issue 37)."""
POOL_REVOKED = "pool.revoked"


class PoolJob(BaseModel):
    """A job the server handed to a pool worker: a queued run and its fresh run token."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    run_id: RunId
    run_token: str


class DatasetRef(BaseModel):
    """A dataset of the phase: its name in the collection, its compiled content hash, its splits."""

    model_config = ConfigDict(extra="ignore", frozen=True)
    name: str
    content_hash: str = Field(pattern=r"^[0-9a-f]{16,128}$")
    splits: tuple[str, ...] = ()
    """Splits the dataset is listed in; none for one a protocol names itself (FewSTAB)."""

    @model_validator(mode="before")
    @classmethod
    def _accept_single_split(cls, data: Any) -> Any:
        if isinstance(data, dict) and "splits" not in data and "split" in data:
            data = {**data, "splits": [data["split"]]}
        return data


ROLE_SPLITS = {"meta_train": "meta-train", "meta_valid": "meta-valid", "meta_test": "meta-test"}
"""The server's `data` roles (server/schemas/competition.py `PhaseData`) -> collection splits."""


class ClaimedRun(BaseModel):
    """The answer to a successful claim: everything the worker needs to evaluate the run.

    The server sends the phase's datasets per role (`data`: collection name, `meta_train`,
    `meta_valid`, `meta_test` lists of `{name, content_hash}`); they are folded into one
    `datasets` list, a dataset listed under several roles (within-domain) appearing once.
    `image` None means the worker's default sandbox image.
    """

    model_config = ConfigDict(extra="ignore", frozen=True)
    run_id: RunId
    fencing_token: int
    lease_expires_at: datetime
    submission_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    protocol: dict[str, Any]
    test_seed: int = Field(ge=0)  # secret: seeds the test tasks; never enters the sandbox
    participant_seed: int = Field(ge=0)  # the only seed the participant side sees
    time_limit_s: float = Field(ge=TIME_LIMIT_BOUND.least, le=TIME_LIMIT_BOUND.most)
    resources: RunResources = RunResources()
    image: str | None = None
    datasets: list[DatasetRef]
    exclusive_host: bool = False
    """Its phase's test data are secret: it runs alone on this host (`worker.host_lock`)."""
    collection: str = "phase"

    @model_validator(mode="before")
    @classmethod
    def _datasets_from_roles(cls, data: Any) -> Any:
        roles_given = isinstance(data, dict) and isinstance(data.get("data"), dict)
        if not roles_given or "datasets" in data:
            return data
        roles, merged = data["data"], dict[str, dict[str, Any]]()
        for role, split in ROLE_SPLITS.items():
            for ref in roles.get(role) or []:
                entry = merged.setdefault(ref["name"], {**ref, "splits": []})
                if entry["content_hash"] != ref["content_hash"]:
                    raise ValueError(f"dataset {ref['name']!r} has two content hashes in the "
                                     "phase data; expected one per name. Fix the phase.")
                entry["splits"].append(split)
        return {**data, "datasets": list(merged.values()),
                "collection": roles.get("collection") or "phase"}


class InternalClient:
    """Calls the internal API with a per-run bearer token; retries transient faults.

    With a `pool_token` (an organizer pool's worker) every call also carries the pool header,
    and a 401 `pool.revoked` sets `pool_revoked`: the run call is dropped as any 401 is, and
    the pool loop stops the worker."""

    def __init__(self, base_url: str, *, timeout_s: float = 60.0, attempts: int = 5,
                 backoff_s: float = 1.0, transport: httpx.BaseTransport | None = None,
                 sleep: Callable[[float], None] = time.sleep,
                 list_images: Callable[[], list[str] | None] | None = None,
                 pool_token: str | None = None,
                 task_isolation: Callable[[], str | None] | None = None,
                 host_lock: bool = False) -> None:
        self._http = httpx.Client(base_url=base_url, timeout=timeout_s, transport=transport)
        self._attempts, self._backoff_s, self._sleep = attempts, backoff_s, sleep
        self._list_images = list_images
        self._pool_token = pool_token
        self._task_isolation = task_isolation or (lambda: None)
        """The start-up probe's finding, sent with claims, heartbeats, job requests (issue 34)."""
        self._host_lock = host_lock
        """Sent with claims and job requests: this worker's runs hold the host lock
        (worker/host_lock.py), so a run marked `exclusive_host` has the host alone. Without it
        the server hands this worker no run of a phase with secret test data."""
        self.pool_revoked = False

    def request_job(self, worker: str, host: str, gpus: list[str],
                    images: list[str]) -> PoolJob | None:
        """Ask the server for a queued run of this worker's pool (`POST /internal/pool/jobs`);
        None when there is none (204; the call is the worker's heartbeat either way). One
        attempt: the pool loop paces its own retries.

        Raises:
            PoolRevokedError: the pool credential is unknown or revoked (401).
            ServerUnavailableError: no answer, or a 5xx.
            ServerRejectedError: another 4xx."""
        url = "/internal/pool/jobs"
        body: dict[str, Any] = {"worker": worker, "host": host, "gpus": gpus, "images": images}
        if self._host_lock:
            body["host_lock"] = True
        if (isolation := self._task_isolation()) is not None:
            body["task_isolation"] = isolation
        try:
            response = self._http.post(url, headers=self._headers(None),
                                       json=storable_json(body))
        except httpx.TransportError as exc:
            raise ServerUnavailableError(f"{url}: {type(exc).__name__}: {exc}; check that the "
                                         "server is up and reachable from the worker") from exc
        if response.status_code == 204:
            return None
        if response.status_code == 401:
            self.pool_revoked = True
            raise PoolRevokedError(f"{url} answered 401 {_text(response)}")
        if response.status_code >= 500:
            raise ServerUnavailableError(f"{url} answered {response.status_code} "
                                         f"{_text(response)}")
        if response.status_code >= 400:
            raise ServerRejectedError(f"{url} answered {response.status_code} "
                                      f"{_text(response)}; expected 200 or 204")
        return PoolJob.model_validate(response.json())

    def close(self) -> None:
        self._http.close()

    def claim(self, run_id: RunId, token: str, worker: str) -> ClaimedRun | None:
        """Take the run's lease; `None` when it is finished or leased by someone else (409).

        The claim also reports the sandbox images this worker's engine holds (when it has a
        `list_images`), which the server checks a phase's image against.
        """
        images = self._list_images() if self._list_images is not None else None
        body = ClaimBody(worker=worker, images=images, host_lock=self._host_lock,
                         task_isolation=self._task_isolation()).to_json()  # type: ignore[arg-type]
        response = self._call("POST", f"/internal/runs/{run_id}/claim", token, json=body)
        return None if response is None else ClaimedRun.model_validate(response.json())

    def report_unhealthy(self, run_id: RunId, token: str, worker: str, reason: str) -> None:
        """Tell the server this worker claims nothing, and why (its disk or engine fails): a
        claim carrying `unhealthy`, which the server records for the workers page and answers
        409 without leasing the run. Best effort, one attempt: the job is retried anyway."""
        body = ClaimBody(worker=worker, unhealthy=reason[:UNHEALTHY_CAP] or "unhealthy")
        try:
            self._http.request("POST", f"/internal/runs/{run_id}/claim",
                               headers=self._headers(token),
                               json=storable_json(body.to_json()))
        except httpx.HTTPError as exc:
            log.warning("worker.unhealthy.unreported", extra={"error": repr(exc)[:300]})

    def heartbeat(self, run_id: RunId, token: str, fencing_token: int, stage: str,
                  progress: dict[str, Any] | None = None) -> bool:
        """Extend the lease; `False` when the token is stale (the run was taken away).
        `progress` (step, tasks_done, tasks_total, log_tail: schemas.internal.RunProgress) is
        shown to the participant watching the run."""
        body = HeartbeatBody(fencing_token=fencing_token, stage=stage,  # type: ignore[arg-type]
                             progress=RunProgress(**progress) if progress else None,
                             task_isolation=self._task_isolation())  # type: ignore[arg-type]
        url = f"/internal/runs/{run_id}/heartbeat"
        return self._call("POST", url, token, json=body.to_json()) is not None

    def finish(self, run_id: RunId, token: str, body: dict[str, Any]) -> bool:
        """Publish the final state; `False` when the token is stale (nothing was written)."""
        return self._call("POST", f"/internal/runs/{run_id}/finish", token, json=body) is not None

    def release(self, run_id: RunId, token: str, fencing_token: int, error: str,
                detail: str | None = None) -> bool:
        """Hand the run back after a platform fault (never charged); `False` when stale.

        `error` is the short cause the participant reads; `detail` is for operators only.
        """
        body = ReleaseBody(fencing_token=fencing_token, error=error, detail=detail).to_json()
        return self._call("POST", f"/internal/runs/{run_id}/release", token, json=body) is not None

    def download_submission(self, run_id: RunId, token: str, dest: Path) -> None:
        """Stream the submission zip to `dest` (overwritten)."""
        self._download(f"/internal/runs/{run_id}/submission", token, dest)

    def download_dataset(self, content_hash: str, token: str, dest: Path) -> None:
        """Stream the tar of a compiled dataset entry to `dest` (overwritten)."""
        self._download(f"/internal/datasets/{content_hash}", token, dest)

    def _call(self, method: str, url: str, token: str, **kwargs: Any) -> httpx.Response | None:
        if "json" in kwargs:  # participant text (message, log, progress) made sendable once
            kwargs["json"] = storable_json(kwargs["json"])
        def send() -> httpx.Response:
            return self._http.request(method, url, headers=self._headers(token), **kwargs)
        return self._with_retries(url, send)

    def _download(self, url: str, token: str, dest: Path) -> None:
        def send() -> httpx.Response:
            # Each attempt restarts the file: a half-written download is never kept.
            with self._http.stream("GET", url, headers=self._headers(token)) as response:
                if response.status_code < 400:
                    with dest.open("wb") as out:
                        for chunk in response.iter_bytes(1 << 20):
                            out.write(chunk)
                else:
                    response.read()  # the error's code (pool.revoked) is in the body
                return response
        if self._with_retries(url, send) is None:
            raise ServerRejectedError(f"GET {url} answered 409 or 401; expected the file; "
                                      "the run's lease was probably taken away.")

    def _with_retries(self, url: str, send: Callable[[], httpx.Response]) -> httpx.Response | None:
        delay, last = self._backoff_s, ""
        for attempt in range(1, self._attempts + 1):
            try:
                response = send()
            except httpx.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                # 409: done or leased elsewhere; 401: the token was rotated (the run was released
                # or re-enqueued, and a newer job carries its token). Either way not ours: drop.
                if response.status_code in (401, 409):
                    self._note_refusal(url, response)
                    return None
                if response.status_code < 400:
                    return response
                if response.status_code < 500:
                    raise ServerRejectedError(
                        f"{url} answered {response.status_code} {_text(response)}; expected 2xx "
                        "or 409. Check the run token and the worker's server_url.")
                last = f"HTTP {response.status_code} {_text(response)}"
            log.warning("client.retry", extra={"url": url, "attempt": attempt, "error": last})
            if attempt < self._attempts:
                self._sleep(delay)
                delay *= 2
        raise ServerUnavailableError(f"{url} failed {self._attempts} times, last: {last}; "
                                     "check that the server is up and reachable from the worker.")

    def _headers(self, token: str | None) -> dict[str, str]:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        if self._pool_token is not None:
            headers[POOL_HEADER] = self._pool_token
        return headers

    def _note_refusal(self, url: str, response: httpx.Response) -> None:
        """Log which refusal a dropped call met (an operator tells a rotated token, 401, from a
        fenced write, 409), and note a revoked pool credential for the pool loop."""
        code = _error_code(response)
        if response.status_code == 401 and code == POOL_REVOKED:
            self.pool_revoked = True
        log.info("client.refused", extra={"url": url, "status": response.status_code,
                                          "code": code})


def _error_code(response: httpx.Response) -> str:
    """The `error.code` of an answer (`server/core/errors.py`), or "" when it has none."""
    try:
        error = response.json().get("error") or {}
        return str(error.get("code") or "")
    except (ValueError, AttributeError, httpx.ResponseNotRead):
        return ""


def _text(response: httpx.Response) -> str:
    try:
        return response.text[:200]
    except httpx.ResponseNotRead:
        return ""
