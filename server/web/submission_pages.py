"""A participant's submissions: the "My submissions" list, a submission's page with its runs,
logs and standing, and one run's detailed results. What each viewer may read is decided by
services/secrecy.py, as for the JSON API."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from server.api.deps import NowDep, OptionalUser, SessionDep, SettingsDep
from server.core.errors import ForbiddenError, NotFoundError
from server.models import TERMINAL_STATES, Competition, Phase, Submission, Team, TeamMember, User
from server.services.audit_view import rerun_reasons
from server.services.close_summary import participant_close_notes
from server.services.secrecy import results_state, test_data_level, view_for
from server.services.submission_view import submission_out
from server.services.submissions import get_visible_submission, in_team_of, queue_position
from server.services.tenancy import organizes_phase
from server.web.actions import submission_actions
from server.web.failure import SANDBOX_PACKAGES, explain_failure
from server.web.rendering import PageRoute, login_redirect, render
from server.web.report import report_response
from server.web.run_usage import usage_rows
from server.web.views import boarded_submissions, served_run, submission_standing
from submission_api.imports import module_advice

router = APIRouter(include_in_schema=False, route_class=PageRoute)


@router.get("/my")
def my_page(request: Request, user: OptionalUser, session: SessionDep, settings: SettingsDep,
            phase: int | None = None) -> Response:
    if user is None:
        return login_redirect(request)
    teams = select(TeamMember.team_id).where(TeamMember.user_id == user.id)
    query = (select(Submission, Phase.name, Competition.title, Competition.id)
             .join(Phase, Phase.id == Submission.phase_id)
             .join(Competition, Competition.id == Phase.competition_id)
             .where(or_(Submission.user_id == user.id,  # and the current team's (32.2)
                        Submission.team_id.in_(teams))))
    if phase is not None:
        query = query.where(Submission.phase_id == phase)
    rows = session.execute(query.order_by(Submission.id.desc()).limit(200)).all()
    on_board = boarded_submissions(session, {s.phase_id for s, *_ in rows}, user)
    names = dict(session.execute(select(User.id, User.username).where(
        User.id.in_({s.user_id for s, *_ in rows} - {user.id}))).all())
    views = {pid: view_for(session, session.get_one(Phase, pid), user)
             for pid in {s.phase_id for s, *_ in rows}}
    items = [{"s": s, "phase_name": name, "competition": title, "competition_id": comp_id,
              "on_board": s.id in on_board,
              "by": None if s.user_id == user.id else names.get(s.user_id),
              "score": s.score if views[s.phase_id].scores else None,
              "position": None if s.state in TERMINAL_STATES
              else queue_position(session, s, settings.default_queue)}
             for s, name, title, comp_id in rows]
    active = any(s.state not in TERMINAL_STATES for s, *_ in rows)
    notes = participant_close_notes(session, user.id, {s.phase_id for s, *_ in rows})
    return render(request, "my.html", user, settings, submissions=items, active=active,
                  close_notes=notes)


@router.get("/submissions/{submission_id}")
def submission_page(submission_id: int, request: Request, user: OptionalUser,
                    session: SessionDep, settings: SettingsDep, now: NowDep) -> Response:
    if user is None:
        return login_redirect(request)
    submission = get_visible_submission(session, submission_id, user)
    phase = session.get_one(Phase, submission.phase_id)
    sees_all = organizes_phase(session, user, phase)
    hidden = not sees_all and phase.hide_logs
    mate = submission.user_id != user.id and in_team_of(session, submission, user)
    owner = submission_owner(session, submission) if sees_all or mate else None
    team = session.get(Team, submission.team_id) if submission.team_id is not None else None
    view = view_for(session, phase, user)
    current = [r for r in submission.runs if r.superseded_at is None]
    runs = [served_run(r, view) for r in current]
    standing = submission_standing(session, phase, submission, sees_all) if view.scores \
        else {"rank": None, "total": None, "on_board": False, "ci95": None, "run_index": None}
    return render(request, "submission.html", user, settings, phase=phase, owner=owner,
                  s=submission_out(session, submission, settings, user), runs=runs,
                  history=[served_run(r, view) for r in submission.runs if r not in current],
                  active=submission.state not in TERMINAL_STATES,
                  model=submission, team=team.name if team else None,
                  actions=submission_actions(submission, user, team_member=mate),
                  logs=None if hidden else runs, explain=explain_failure, view=view,
                  test_data=test_data_level(phase), results=results_state(phase),
                  sandbox_packages=SANDBOX_PACKAGES, now=now, competition=phase.competition,
                  module_advice=module_advice, standing=standing,
                  reruns=rerun_reasons(session, submission.id),
                  usage=usage_rows(current) if sees_all else [])


def submission_owner(session: Session, submission: Submission) -> str:
    return session.get_one(User, submission.user_id).username


@router.get("/submissions/{submission_id}/runs/{run_index}/report")
def run_report(submission_id: int, run_index: int, request: Request, user: OptionalUser,
               session: SessionDep, download: bool = False) -> Response:
    """The detailed results of one finished run, rendered by submission_api.report."""
    if user is None:
        return login_redirect(request)
    submission = get_visible_submission(session, submission_id, user)
    run = next((r for r in submission.runs if r.index == run_index), None)
    phase = session.get_one(Phase, submission.phase_id)
    if not view_for(session, phase, user).details:
        raise ForbiddenError(f"the detailed results of phase {phase.id} are withheld until its "
                             "organizers publish them; its page says when",
                             code="results.withheld")
    if run is None or run.state != "finished" or not run.summary:
        raise NotFoundError(f"submission {submission_id} has no finished run {run_index}; "
                            "detailed results exist once a run has finished")
    return report_response(submission, run, phase, download=download)
