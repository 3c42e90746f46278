"""Fact sheets (issue 23): a phase may ask its entrants questions (bundle `factsheet:` — text,
choice, number or URL, required or not). Participants who may submit answer them (web form,
API, or `arena factsheet PHASE answers.yaml`); answers are checked against the questions and
saved whole, replacing the previous ones. The competition's organizers export every answer
(JSON or CSV), with who submitted to the phase but has not answered yet.
"""

from __future__ import annotations

import csv
import io
import re
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from server.core.errors import ForbiddenError, InvalidInputError, NotFoundError
from server.models import AuditLog, FactsheetAnswer, Phase, Submission, User
from server.services.csv_safety import neutralize_cell
from server.services.participation import status_of

URL = re.compile(r"^https?://[^\s<>\"']{1,490}$")
MAX_TEXT = 5000


def questions(phase: Phase) -> list[dict[str, Any]]:
    return list(phase.factsheet or [])


def check_answers(phase: Phase, answers: dict[str, Any]) -> dict[str, Any]:
    """Answers keyed by question key, as stored; raises InvalidInputError naming every wrong
    one (unknown key, missing required answer, not a number, not a choice, not a URL)."""
    asked = {q["key"]: q for q in questions(phase)}
    problems = [f"{k!r} is not a question of this phase (its keys: {sorted(asked)})"
                for k in answers if k not in asked]
    clean: dict[str, Any] = {}
    for key, q in asked.items():
        value = answers.get(key)
        text = "" if value is None else str(value).strip()
        if not text:
            if q.get("required"):
                problems.append(f"{key!r} ({q['label']}) is required")
            continue
        kind = q.get("kind", "text")
        if kind == "number":
            try:
                clean[key] = float(text)
            except ValueError:
                problems.append(f"{key!r} wants a number, got {text[:40]!r}")
        elif kind == "choice" and text not in q.get("choices", []):
            problems.append(f"{key!r} wants one of {q['choices']}, got {text[:40]!r}")
        elif kind == "url" and not URL.match(text):
            problems.append(f"{key!r} wants an http(s) URL, got {text[:40]!r}")
        elif len(text) > MAX_TEXT:
            problems.append(f"{key!r} has {len(text)} characters; keep it to {MAX_TEXT}")
        else:
            clean[key] = text
    if problems:
        raise InvalidInputError("the fact sheet has problems: " + "; ".join(problems) +
                                " — fix them and send it again (nothing was saved)",
                                code="factsheet.invalid")
    return clean


def my_answers(session: Session, phase: Phase, user: User) -> dict[str, Any]:
    row = _row(session, phase.id, user.id)
    return dict(row.answers) if row else {}


def _row(session: Session, phase_id: int, user_id: int) -> FactsheetAnswer | None:
    return session.execute(select(FactsheetAnswer).where(
        FactsheetAnswer.phase_id == phase_id,
        FactsheetAnswer.user_id == user_id)).scalar_one_or_none()


def save_answers(session: Session, phase: Phase, user: User, answers: dict[str, Any],
                 now: datetime) -> dict[str, Any]:
    """Check and store the caller's answers (committed); returns them as stored."""
    if not questions(phase):
        raise NotFoundError(f"phase {phase.id} has no fact sheet", code="factsheet.none")
    if status_of(session, phase.competition, user) != "approved":
        raise ForbiddenError("only participants of the competition answer its fact sheet; "
                             "join it first", code="factsheet.not_participant")
    clean = check_answers(phase, answers)
    row = _row(session, phase.id, user.id)
    if row is None:
        row = FactsheetAnswer(phase_id=phase.id, user_id=user.id)
        session.add(row)
    row.answers, row.updated_at = clean, now
    session.add(AuditLog(actor_id=user.id, action="factsheet.answer", target=f"phase:{phase.id}",
                         details={"keys": sorted(clean)}, at=now))
    session.commit()
    return clean


def export(session: Session, phase: Phase) -> dict[str, Any]:
    """Every answer of the phase, and who submitted to it without answering (organizers)."""
    rows = session.execute(select(FactsheetAnswer, User.username)
                           .join(User, User.id == FactsheetAnswer.user_id)
                           .where(FactsheetAnswer.phase_id == phase.id)
                           .order_by(User.username)).all()
    answered = {a.user_id for a, _ in rows}
    entrants = session.execute(select(User.id, User.username).join(
        Submission, Submission.user_id == User.id).where(Submission.phase_id == phase.id)
        .distinct().order_by(User.username)).all()
    return {"phase_id": phase.id, "questions": questions(phase),
            "answers": [{"user_id": a.user_id, "username": name, "updated_at": a.updated_at,
                         "answers": a.answers} for a, name in rows],
            "missing": [{"user_id": uid, "username": name} for uid, name in entrants
                        if uid not in answered]}


def export_csv(data: dict[str, Any]) -> str:
    """One row per answering account, one column per question (missing ones at the end,
    with empty answers, so a spreadsheet shows who is missing). Every text cell goes through
    `neutralize_cell` (issue 33.9): an answer like `=HYPERLINK(...)` is shown, never run."""
    keys = [q["key"] for q in data["questions"]]
    out = io.StringIO()
    writer = csv.writer(out)

    def row(cells: list[Any]) -> None:
        writer.writerow([neutralize_cell(c) for c in cells])

    row(["username", "user_id", "answered", "updated_at", *keys])
    for a in data["answers"]:
        row([a["username"], a["user_id"], "yes", a["updated_at"].isoformat(),
             *[a["answers"].get(k, "") for k in keys]])
    for m in data["missing"]:
        row([m["username"], m["user_id"], "no", "", *["" for _ in keys]])
    return out.getvalue()
