"""Every error the server reports, and the one table mapping each to an HTTP status and code.

Services raise these plain exceptions (no HTTP in services); `install_error_handlers` turns them
into `{"error": {"code", "message", "family"}}` answers. Codes are a stable wire contract:
clients (the CLI, the worker) branch on them, never on messages. Family says who must act:
`participant` (fix your submission or request), `platform` (ours; retried, never charged).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from submission_api.submission_zip import UnsafeZipError

log = logging.getLogger(__name__)
DATABASE_RETRY_AFTER_S = 5


class ArenaError(Exception):
    """Base class; `code` may be refined per instance."""

    code = "error"

    def __init__(self, message: str, code: str | None = None, **details: object) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        if code:
            self.code = code


class NotFoundError(ArenaError):
    code = "not_found"


class AuthRequiredError(ArenaError):
    code = "auth.required"


class BadCredentialsError(ArenaError):
    code = "auth.bad_credentials"


class ForbiddenError(ArenaError):
    code = "auth.forbidden"


class CsrfError(ArenaError):
    code = "auth.csrf"


class ConflictError(ArenaError):
    code = "conflict"


class StaleLeaseError(ConflictError):
    code = "run.stale_lease"


class NotClaimableError(ConflictError):
    code = "run.not_claimable"


class PhaseClosedError(ArenaError):
    code = "phase.closed"


class QuotaExceededError(ArenaError):
    code = "quota.exceeded"


class UploadTooLargeError(ArenaError):
    code = "upload.too_large"


class TooManyUploadsError(ArenaError):
    """One account streams too many uploads at once (services/upload_gate.py)."""

    code = "upload.too_many"


class ServerBusyError(ArenaError):
    """The server streams as many uploads as it takes; the client should send again later."""

    code = "upload.busy"


class UploadStalledError(ArenaError):
    """An upload sent nothing for too long: its slot goes to someone else."""

    code = "upload.stalled"


class BodyTooLargeError(ArenaError):
    """A request body over its route's bound (a bundle, a JSON document)."""

    code = "request.too_large"


class DatabaseUnavailableError(ArenaError):
    """The database cannot be reached or gave no connection in time: ours, for a while."""

    code = "database.unavailable"
class TooManyAttemptsError(ArenaError):
    """Too many failed logins for an account or from an address (services/login_limit.py)."""

    code = "auth.too_many_attempts"


class InvalidInputError(ArenaError):
    code = "invalid_input"


class OutOfRangeError(InvalidInputError):
    code = "request.out_of_range"


# exception class -> (HTTP status, family). Most specific classes first: lookup walks the MRO.
ERROR_TABLE: dict[type[Exception], tuple[int, str]] = {
    UnsafeZipError: (422, "participant"),
    NotFoundError: (404, "participant"),
    AuthRequiredError: (401, "participant"),
    BadCredentialsError: (401, "participant"),
    ForbiddenError: (403, "participant"),
    CsrfError: (403, "participant"),
    StaleLeaseError: (409, "platform"),
    NotClaimableError: (409, "platform"),
    ConflictError: (409, "participant"),
    PhaseClosedError: (409, "participant"),
    QuotaExceededError: (429, "participant"),
    UploadTooLargeError: (413, "participant"),
    BodyTooLargeError: (413, "participant"),
    DatabaseUnavailableError: (503, "platform"),
    TooManyUploadsError: (429, "participant"),
    ServerBusyError: (503, "platform"),
    UploadStalledError: (408, "participant"),
    TooManyAttemptsError: (429, "participant"),
    InvalidInputError: (422, "participant"),
}


def describe_error(exc: Exception) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON body for `exc` (500 `internal` when not in the table)."""
    for cls in type(exc).__mro__:
        if cls in ERROR_TABLE:
            status, family = ERROR_TABLE[cls]
            body = {"code": exc.code, "message": exc.message, "family": family}  # type: ignore[attr-defined]
            if isinstance(exc, ArenaError) and exc.details:
                body["details"] = exc.details
            return status, {"error": body}
    return 500, {"error": {"code": "internal", "family": "platform",
                           "message": "internal server error; it has been logged"}}


def is_connection_failure(exc: Exception) -> bool:
    """Whether a database error means "no connection" (server down, connection lost, pool
    exhausted) rather than a fault of the statement itself."""
    if isinstance(exc, PoolTimeoutError | InterfaceError):
        return True
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    text = str(getattr(exc, "orig", exc)).lower()
    return isinstance(exc, OperationalError) and any(sign in text for sign in (
        "connection", "could not connect", "server closed", "terminating", "shutting down",
        "the database system is", "timeout", "timed out", "refused", "locked"))


def install_error_handlers(app: FastAPI) -> None:
    """Register one handler per table entry, plus request validation."""

    async def handle(_request: Request, exc: Exception) -> JSONResponse:
        status, body = describe_error(exc)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        retry_after = getattr(exc, "details", {}).get("retry_after_s")
        if retry_after is not None:  # refused for now, not for good: say when to come back
            headers = {"Retry-After": str(retry_after)}
        return JSONResponse(body, status_code=status, headers=headers)

    async def handle_validation(_request: Request, exc: Exception) -> JSONResponse:
        # Registered for RequestValidationError alone; Starlette types every handler's `exc`
        # as Exception.
        errors = exc.errors() if isinstance(exc, RequestValidationError) else []
        problems = [f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in errors]
        message = "the request does not match the expected shape: " + "; ".join(problems)
        body = {"code": "request.invalid", "message": message, "family": "participant",
                "details": {"errors": problems}}
        return JSONResponse({"error": body}, status_code=422)

    async def handle_out_of_range(request: Request, exc: Exception) -> JSONResponse:
        # An id or number beyond what the database column holds (e.g. /phases/2**63, a seed of
        # 10**40): SQLite raises OverflowError, Postgres a DataError. The request's fault.
        return await handle(request, OutOfRangeError(
            f"a number in the request is out of range for storage ({type(exc).__name__}); "
            "expected ids and counts within 64-bit (seeds, limits and quotas within 32-bit) "
            "integers — send a smaller value"))

    async def handle_database_down(request: Request, exc: Exception) -> JSONResponse:
        # Postgres stopped, restarting, or no pooled connection free in time: the platform's
        # fault and a passing one. Answered 503 with Retry-After and the usual JSON body
        # (issue 21: it was a plain-text 500). An error inside a live connection (a bad
        # statement) is not this: only connection-level failures are.
        log.warning("db.unavailable", extra={"error": f"{type(exc).__name__}: {exc}"[:500]})
        return await handle(request, DatabaseUnavailableError(
            "the database is unavailable for a moment (restarting or overloaded); nothing "
            "was changed by this request — send it again shortly",
            retry_after_s=DATABASE_RETRY_AFTER_S))

    async def handle_operational(request: Request, exc: Exception) -> JSONResponse:
        if is_connection_failure(exc):
            return await handle_database_down(request, exc)
        log.error("db.error", exc_info=exc)
        status, body = describe_error(exc)
        return JSONResponse(body, status_code=status)

    for cls in ERROR_TABLE:
        app.add_exception_handler(cls, handle)
    app.add_exception_handler(PoolTimeoutError, handle_database_down)
    app.add_exception_handler(OperationalError, handle_operational)
    app.add_exception_handler(InterfaceError, handle_operational)
    app.add_exception_handler(RequestValidationError, handle_validation)
    app.add_exception_handler(OverflowError, handle_out_of_range)
    app.add_exception_handler(DataError, handle_out_of_range)
