"""Accepting a submission: validate the stored zip, then charge the quota and create the
Submission and its Runs in one transaction, then enqueue after commit.

The bytes have already been streamed to a temp file by the caller (see core/multipart.py) with a
size cap and a running sha256; nothing here holds the upload in memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.config import Settings
from server.core.db import Database
from server.core.errors import InvalidInputError, NotFoundError, PhaseClosedError
from server.core.security import hash_token, new_token
from server.models import AuditLog, Competition, Phase, Run, Submission, User
from server.services.methods import Method
from server.services.participation import check_may_submit
from server.services.queue import JobQueue, enqueue_quietly
from server.services.quotas import check_quota, lock_participation, lock_team, team_id_of
from server.services.storage import Storage, lock_content, place_by_hash
from submission_api.contract.states import RunState
from submission_api.submission_zip import ZipLimits, ZipReport, check_submission_zip


def zip_limits(settings: Settings) -> ZipLimits:
    """The zip checks' bounds, from the server's settings (the API and the web form alike)."""
    return ZipLimits(max_files=settings.max_zip_files,
                     max_total_uncompressed=settings.max_uncompressed_bytes,
                     max_file_uncompressed=settings.max_uncompressed_bytes)


@dataclass(frozen=True)
class StagedUpload:
    """A fully received upload sitting in storage/tmp."""

    path: Path
    sha256: str
    size: int


def check_phase_open(phase: Phase, now: datetime) -> None:
    """Raise PhaseClosedError unless the phase accepts submissions at `now`."""
    if phase.status != "open":
        raise PhaseClosedError(
            f"phase {phase.id} is {phase.status!r}; expected an open phase — "
            "check the competition page for the phase that accepts submissions"
        )
    if phase.starts_at and now < phase.starts_at:
        raise PhaseClosedError(f"phase {phase.id} opens at {phase.starts_at.isoformat()}")
    if phase.ends_at and now >= phase.ends_at:
        raise PhaseClosedError(f"phase {phase.id} closed at {phase.ends_at.isoformat()}")
    if phase.carry_from_id is not None:
        raise PhaseClosedError(
            f"phase {phase.id} is a final phase: it takes no uploads and evaluates the "
            f"submissions chosen in phase {phase.carry_from_id} when that phase closes — "
            "select your submission there")


def check_league(comp: Competition | None, league: str | None) -> str | None:
    """The league a submission enters: the one named, or the competition's first."""
    names = [lg["name"] for lg in (comp.leagues if comp else None) or []]
    if not names:
        if league not in (None, ""):
            raise InvalidInputError(f"league {league!r} was sent but this competition has no "
                                    "leagues; leave the 'league' form field out",
                                    code="submission.unknown_league")
        return None
    if league in (None, ""):
        return str(names[0])
    if league not in names:
        raise InvalidInputError(f"league {league!r} is not one of this competition's leagues "
                                f"{names}; send one of them in the 'league' form field",
                                code="submission.unknown_league")
    return league


def accept_submission(db: Database, storage: Storage, queue: JobQueue, *, user_id: int,
                      phase_id: int, staged: StagedUpload, now: datetime, limits: ZipLimits,
                      default_queue: str, note: str = "",
                      league: str | None = None, method: Method = Method()) -> Submission:
    """Validate, store and register a submission with its `method`; enqueue its runs after
    commit.

    The cheap checks (phase open, participation, league, quota) run first, in a short read,
    so a refused upload costs no decompression; the zip check next; then the one transaction
    repeats the cheap checks under its locks (they decide) and places the zip by its hash.

    Raises UnsafeZipError, NotFoundError, PhaseClosedError, QuotaExceededError; on any error
    the temp file is removed and nothing is stored (the method included: it is written in the
    same transaction as the submission, so an upload is registered whole or not at all).
    """
    try:
        with db.session() as session:
            _check_may_upload(session, user_id, phase_id, now, league)
        report = check_submission_zip(staged.path, limits)
        final = storage.submission_path(staged.sha256)
        submission, jobs = _register(db, storage, user_id, phase_id, staged, report, final, now,
                                     default_queue, note, league, method)
    except Exception:
        staged.path.unlink(missing_ok=True)
        raise
    enqueue_quietly(queue, jobs)
    return submission


def _check_may_upload(session: Session, user_id: int, phase_id: int, now: datetime,
                      league: str | None,
                      lock: bool = False) -> tuple[Phase, str | None, int | None]:
    """Phase exists and is open, the user may submit, the league is known, the quota allows
    (the team's, when the user is in one: its row is locked so members' uploads serialize)."""
    phase = session.get(Phase, phase_id)
    if phase is None:
        raise NotFoundError(f"no phase with id {phase_id}; list phases at /api/v1/phases")
    check_phase_open(phase, now)
    comp = session.get_one(Competition, phase.competition_id)
    check_may_submit(session, comp, session.get_one(User, user_id))
    league = check_league(comp, league)
    team_id = team_id_of(session, user_id, comp.id)
    if lock and team_id is not None:
        lock_team(session, team_id)
    check_quota(session, user_id, phase, now)
    return phase, league, team_id


def _register(db: Database, storage: Storage, user_id: int, phase_id: int,
              staged: StagedUpload, report: ZipReport, final: Path, now: datetime,
              default_queue: str, note: str, league: str | None,
              method: Method) -> tuple[Submission, list[tuple[int, str, str]]]:
    """The one transaction: lock, check phase and quota, insert submission (with its method)
    and runs."""
    created = False
    try:
        with db.session(write=True) as session:
            participation = lock_participation(session, user_id, phase_id)
            phase, league, team_id = _check_may_upload(session, user_id, phase_id, now,
                                                       league, lock=True)
            # The zip is placed under the content lock, inside the transaction that adds its
            # reference: a concurrent refusal of the same bytes cannot delete it meanwhile.
            lock_content(session, staged.sha256)
            created = place_by_hash(staged.path, final)
            return _insert(session, storage, user_id, phase, staged, report, final, now,
                           default_queue, note, league, participation, team_id, method)
    except Exception:
        if created:
            _remove_if_unreferenced(db, staged.sha256, final)
        raise


def _insert(session: Session, storage: Storage, user_id: int, phase: Phase,
            staged: StagedUpload, report: ZipReport, final: Path, now: datetime,
            default_queue: str, note: str, league: str | None,
            participation: Any, team_id: int | None,
            method: Method) -> tuple[Submission, list[tuple[int, str, str]]]:
    """Insert the submission, its runs and the audit row (caller holds the locks)."""
    phase_id = phase.id
    participation.n_uploads += 1
    submission = Submission(
        phase_id=phase_id, user_id=user_id, sha256=staged.sha256, size_bytes=staged.size,
        storage_path=storage.relative(final), zip_root=report.root, note=note[:2000],
        state="queued", created_at=now, league=league, team_id=team_id,
        method_name=method.name, method_description=method.description,
        code_url=method.code_url,
    )
    tokens = [new_token() for _ in range(max(phase.runs_per_submission, 1))]
    submission.runs = [
        Run(index=i, seed=i, state=RunState.QUEUED, run_token_hash=hash_token(tok), enqueued_at=now,
            created_at=now)
        for i, tok in enumerate(tokens)
    ]
    session.add(submission)
    session.add(AuditLog(actor_id=user_id, action="submission.create",
                         target=f"phase:{phase_id}", details={"sha256": staged.sha256},
                         at=now))
    session.flush()
    queue_name = phase.queue or default_queue
    jobs = [(run.id, tok, queue_name) for run, tok in zip(submission.runs, tokens, strict=True)]
    return submission, jobs


def _remove_if_unreferenced(db: Database, sha256: str, final: Path) -> None:
    """Delete a stored zip no committed submission refers to, deciding under the content lock
    (a concurrent upload of the same bytes places and references it under the same lock)."""
    with db.session(write=True) as session:
        lock_content(session, sha256)
        used = session.execute(
            select(Submission.id).where(Submission.sha256 == sha256).limit(1)).first()
        if used is None:
            final.unlink(missing_ok=True)
