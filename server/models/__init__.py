"""Table models (SQLAlchemy 2, typed). API schemas live apart, in server/schemas."""

from server.models.account import LoginAttempt, PasswordReset
from server.models.base import Base, UTCDateTime, utcnow
from server.models.competition import (
    Competition,
    CompetitionMember,
    Dataset,
    DatasetGrant,
    Participation,
    Phase,
)
from server.models.factsheet import FactsheetAnswer
from server.models.pool import PoolCredential, PoolOffer, PoolPhase, WorkerPool
from server.models.submission import (
    ACTIVE_STATES,
    PLATFORM_ERROR,
    RUN_STATES,
    TERMINAL_STATES,
    Run,
    Submission,
    TaskResult,
)
from server.models.team import Team, TeamMember, TeamStint
from server.models.user import ROLES, ApiToken, AuditLog, User
from server.models.worker import Worker

__all__ = [
    "ACTIVE_STATES", "PLATFORM_ERROR", "ROLES", "RUN_STATES", "TERMINAL_STATES",
    "ApiToken", "AuditLog", "Base", "Competition", "CompetitionMember", "Dataset",
    "DatasetGrant", "FactsheetAnswer", "LoginAttempt", "Participation", "PasswordReset",
    "Phase", "PoolCredential", "PoolOffer", "PoolPhase", "Run",
    "Submission", "TaskResult", "Team", "TeamMember", "TeamStint", "UTCDateTime", "User",
    "Worker", "WorkerPool", "utcnow",
]
