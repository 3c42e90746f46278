"""The run contract: every fact that crosses the seams between server, worker and runner, once.

States and their transitions (`states`), failure reasons and the stage -> reason table
(`reasons`), caps on text (`caps`), a run's resources with their defaults and bounds
(`resources`), the internal API's wire models (`wire`), the job name and broker layout (`jobs`),
and the verdict decided over a fixed result record (`record`, `verdict`). Pure standard
library: it runs inside the sandbox and on a participant's laptop as well as on the server.
"""

from submission_api.contract.caps import MESSAGE_CAP, cap_error, cap_head, cap_tail, cap_trace
from submission_api.contract.reasons import STAGE_REASONS, FailureReason
from submission_api.contract.record import MetaTestEnd, ReportedStatus, ResultRecord, signal_of
from submission_api.contract.resources import RESOURCE_BOUNDS, RunResources
from submission_api.contract.states import RunState, check_transition
from submission_api.contract.verdict import Verdict, VerdictKind, decide_verdict

__all__ = [
    "MESSAGE_CAP", "RESOURCE_BOUNDS", "STAGE_REASONS", "FailureReason", "MetaTestEnd",
    "ReportedStatus", "ResultRecord", "RunResources", "RunState", "Verdict", "VerdictKind",
    "cap_error", "cap_head", "cap_tail", "cap_trace", "check_transition", "decide_verdict",
    "signal_of",
]
