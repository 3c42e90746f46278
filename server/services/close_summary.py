"""What closing a phase did to each competitor (a team, or a participant alone): carried into
its final, or not and why; every member of a team reads the team's line as their own.

`finals.close_phase` writes this list into the `phase.close` audit entry (so the log says who
was carried, who was below their league's threshold, who was disqualified, who had no finished
submission); the organizer's dashboard shows it under the closed phase, and each participant's
own page (/my) shows their line (their team's) — read back from that one audit entry, never
recomputed, so all three say the same thing even after later reruns or disqualifications.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.models import AuditLog, Competition, Phase, Submission, Team, TeamMember, User

OUTCOMES = ("carried", "below_threshold", "disqualified", "no_finished_submission")


def compute_close_summary(session: Session, phase: Phase, finals: list[Phase],
                          skipped: dict[int, list[int]]) -> list[dict[str, Any]]:
    """One line per competitor (team, or participant alone) and league of `phase`, for the
    phases carrying from it.

    Each line: user_id and username (who made the entry considered), team_id, team (its name)
    and member_ids (the team's members at the close: each of them reads the line as theirs),
    competitor (the team's name, else the username), league, outcome (one of OUTCOMES),
    submission_id (the entry considered, if any), final_id, carried_id, score, threshold,
    reason."""
    comp = session.get_one(Competition, phase.competition_id)
    thresholds = {lg["name"]: lg.get("final_threshold") for lg in (comp.leagues or [])}
    names = dict(session.execute(select(User.id, User.username).join(
        Submission, Submission.user_id == User.id).where(Submission.phase_id == phase.id)).all())
    teams = {t.id: t.name for t in session.execute(select(Team).where(
        Team.competition_id == comp.id)).scalars()}
    members: dict[int, list[int]] = {}
    for team_id, user_id in session.execute(select(TeamMember.team_id, TeamMember.user_id)
                                            .where(TeamMember.competition_id == comp.id)
                                            .order_by(TeamMember.id)).all():
        members.setdefault(team_id, []).append(user_id)
    lines: dict[tuple[tuple[str, int], str | None], dict[str, Any]] = {}

    def put(sub: Submission, outcome: str, **extra: Any) -> None:
        team = sub.team_id if sub.team_id in teams else None
        who = ("team", team) if team is not None else ("user", sub.user_id)
        username = names.get(sub.user_id, "?")
        lines.setdefault((who, sub.league), {
            "user_id": sub.user_id, "username": username, "team_id": team,
            "team": teams.get(team) if team is not None else None,
            "member_ids": members.get(team, []) if team is not None else [sub.user_id],
            "competitor": teams[team] if team is not None else username,
            "league": sub.league, "outcome": outcome, "submission_id": sub.id,
            "score": sub.score, "final_id": None, "carried_id": None, "threshold": None,
            "reason": None} | extra)

    for final in finals:
        for copy in session.execute(select(Submission).where(
                Submission.phase_id == final.id, Submission.carried_from_id.is_not(None))
                .order_by(Submission.id)).scalars():
            origin = session.get(Submission, copy.carried_from_id)
            if origin is not None and not origin.is_baseline:
                put(origin, "carried", final_id=final.id, carried_id=copy.id)
        for origin_id in skipped.get(final.id, []):
            origin = session.get_one(Submission, origin_id)
            put(origin, "below_threshold", final_id=final.id,
                threshold=thresholds.get(origin.league))
    rest = session.execute(select(Submission).where(
        Submission.phase_id == phase.id, Submission.is_baseline.is_(False))
        .order_by(Submission.disqualified_at.is_(None), Submission.id.desc())).scalars()
    for sub in rest:
        if sub.disqualified_at is not None:
            put(sub, "disqualified", reason=sub.disqualified_reason)
        else:
            put(sub, "no_finished_submission", reason=f"its state is {sub.state}")
    return sorted(lines.values(), key=lambda line: (OUTCOMES.index(line["outcome"]),
                                                     line["competitor"]))


def concerns(line: dict[str, Any], user_id: int) -> bool:
    """True when `line` is about `user_id`: a member of its team at the close, or (alone, or
    a line written before teams were counted) the one who made its entry."""
    return user_id in line.get("member_ids", [line["user_id"]])


def describe(line: dict[str, Any], phase_name: str, final_names: dict[int, str]) -> str:
    """A participant's line in words (their page, the dashboard's title attribute)."""
    final = final_names.get(line["final_id"], "the final phase")
    entry = f"submission #{line['submission_id']}"
    if line.get("team"):
        entry = f"team {line['team']}'s {entry} (by {line['username']})"
        you = f"your team {line['team']} was"
    else:
        you = "you were"
    if line["outcome"] == "carried":
        return (f"When {phase_name} closed, your {entry} was carried into {final} "
                f"(there it is #{line['carried_id']}, evaluated again on the final's tasks).")
    if line["outcome"] == "below_threshold":
        return (f"When {phase_name} closed, your {entry} was not carried into {final}: its "
                f"score {line['score']:.3f} is not above the threshold {line['threshold']} of "
                f"league {line['league'] or '(default)'}.")
    if line["outcome"] == "disqualified":
        return (f"When {phase_name} closed, {you} not carried into {final}: your {entry} "
                f"was disqualified ({line['reason']}) and no other finished one stood for "
                f"{'it' if line.get('team') else 'you'}.")
    return (f"When {phase_name} closed, {you} not carried into {final}: none of your "
            f"{'team' + chr(39) + 's ' if line.get('team') else ''}submissions had finished "
            f"with a score (the latest, {entry}, {line['reason']}).")


def latest_close_summaries(session: Session, phase_ids: list[int]) -> dict[int, dict[str, Any]]:
    """phase id -> the latest `phase.close` audit details of each of `phase_ids` that has one
    with a summary ({"at", "summary", ...})."""
    if not phase_ids:
        return {}
    targets = {f"phase:{pid}": pid for pid in phase_ids}
    rows = session.execute(select(AuditLog).where(
        AuditLog.action == "phase.close", AuditLog.target.in_(list(targets)))
        .order_by(AuditLog.id)).scalars()
    found = {}
    for row in rows:
        if "summary" in (row.details or {}):
            found[targets[row.target]] = row.details | {"at": row.at}
    return found


def participant_close_notes(session: Session, user_id: int,
                            phase_ids: set[int]) -> list[dict[str, Any]]:
    """The close-summary lines about `user_id` in the given phases, in words, for /my."""
    notes = []
    for pid, details in sorted(latest_close_summaries(session, sorted(phase_ids)).items()):
        phase = session.get_one(Phase, pid)
        final_names = {p.id: p.name for p in phase.competition.phases}
        for line in details["summary"]:
            if concerns(line, user_id):
                notes.append({"phase_id": pid, "outcome": line["outcome"], "at": details["at"],
                              "text": describe(line, phase.name, final_names)})
    return notes
