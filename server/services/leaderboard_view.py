"""What a viewer sees of a leaderboard, and its CSV export.

Hiding applies to participants and anonymous viewers during a phase (organizers of the
competition always see everything): `scores` keeps who has an entry but drops ranks and every
number (rows then in name order, so the order reveals nothing); `board` shows no rows at all.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from server.models import Competition, Phase
from server.services.leaderboard import Entry, compute_leaderboard

CSV_FIXED = ["rank", "username", "league", "submission_id", "score", "ci95", "average_rank",
             "baseline", "selected", "submitted_at"]


def league_names(comp: Competition | None) -> list[str]:
    return [lg["name"] for lg in (comp.leagues if comp else None) or []]


def view_leaderboard(session: Any, phase: Phase, comp: Competition | None, league: str | None,
                     sees_all: bool) -> dict[str, Any]:
    """The leaderboard as a JSON-ready dict for one league (default: the first)."""
    leagues = league_names(comp)
    if league is None and leagues:
        league = leagues[0]
    settings = phase.leaderboard or {}
    hidden = "none" if sees_all else settings.get("hidden", "none")
    entries: list[Entry] = [] if hidden == "board" else compute_leaderboard(session, phase, league)
    rows = [_row(e, hidden == "scores") for e in entries]
    if hidden == "scores":
        rows.sort(key=lambda r: (r["username"], r["submission_id"]))
    datasets = sorted({d for e in entries for d in e.per_dataset}) if hidden == "none" else []
    return {"phase_id": phase.id, "rule": phase.leaderboard_rule,
            "ranking": settings.get("ranking", "score"),
            "columns": settings.get("columns", ["score", "ci95", "per_dataset"]),
            "hidden": settings.get("hidden", "none"), "league": league, "leagues": leagues,
            "datasets": datasets, "entries": rows}


def _row(entry: Entry, hide_numbers: bool) -> dict[str, Any]:
    row = {"rank": entry.rank, "username": entry.username, "submission_id": entry.submission_id,
           "score": entry.score, "created_at": entry.created_at, "league": entry.league,
           "ci95": entry.ci95, "per_dataset": entry.per_dataset,
           "average_rank": entry.average_rank, "is_baseline": entry.is_baseline,
           "is_selected": entry.is_selected}
    if hide_numbers:
        row |= {"rank": None, "score": None, "ci95": None, "per_dataset": None,
                "average_rank": None}
    return row


def leaderboard_csv(board: dict[str, Any]) -> str:
    """One row per entry: the fixed columns, then one column per dataset."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_FIXED + [f"dataset:{d}" for d in board["datasets"]])
    for e in board["entries"]:
        per_dataset = e["per_dataset"] or {}
        writer.writerow([
            e["rank"], e["username"], e["league"] or "", e["submission_id"],
            _num(e["score"]), _num(e["ci95"]), _num(e["average_rank"]),
            int(e["is_baseline"]), int(e["is_selected"]), e["created_at"].isoformat(),
            *[_num(per_dataset.get(d)) for d in board["datasets"]]])
    return out.getvalue()


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"
