"""What a viewer sees of a leaderboard, and its CSV export.

Hiding applies to participants and anonymous viewers during a phase (organizers of the
competition always see everything): `scores` keeps who has an entry but drops ranks and every
number (rows then in name order, so the order reveals nothing); `board` shows no rows at all.
`leaderboard_json` writes the API's answer directly (it is already in the wire shape): validating
10,000 entries through the response model took a fifth of a request. `cached_leaderboard_json`
keeps that answer while the phase's fingerprint holds (issue 38.5: a whole 10,000-entry board
was ~1 s of server CPU per reader, and a crowd of readers asked for the same bytes).
"""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pydantic_core

from server.models import Competition, Phase
from server.services.csv_safety import neutralize_cell
from server.services.leaderboard import Entry, Ranked, build_entries
from server.services.leaderboard_cache import FingerprintCache, cached_rank_leaderboard
from server.services.leaderboard_stats import (
    cached_board_statistics,
    compute_flip_statistics,
    shows_statistics,
)
from server.services.scores import explain_phase_score, phase_scoring
from server.services.secrecy import board_hidden
from submission_api.scoring.aggregate import compute_order_flips

MAX_ANSWERS = 256
"""JSON answers kept (per phase, league, viewer kind and window), least recently used out."""
_answers: FingerprintCache[bytes] = FingerprintCache(MAX_ANSWERS)

CSV_FIXED = ["rank", "competitor", "competitor_kind", "username", "method", "league",
             "submission_id", "score", "ci95", "average_rank", "baseline", "selected",
             "submitted_at"]
"""`competitor` is who the entry stands for (the team's name, else the username), its kind
`team` or `user`; `username` made the entry. Text cells pass through
`csv_safety.neutralize_cell` (a team name or method a spreadsheet would evaluate)."""
CSV_STATISTICS = ["rank_low", "rank_high", "tied_group"]
"""Columns after CSV_FIXED when the phase shows statistics (rank interval, tied group)."""


def league_names(comp: Competition | None) -> list[str]:
    return [lg["name"] for lg in (comp.leagues if comp else None) or []]


def view_leaderboard(session: Any, phase: Phase, comp: Competition | None, league: str | None,
                     sees_all: bool, *, offset: int = 0, limit: int | None = None,
                     user_id: int | None = None,
                     team_ids: frozenset[int] = frozenset()) -> dict[str, Any]:
    """The leaderboard as a JSON-ready dict for one league (default: the first).

    `offset`/`limit` cut a window of the board in its shown order (ranks stay those of the
    whole board); `total` counts every entry. Entries of `user_id` outside the window come
    back apart, in `pinned` (for a page that always shows the viewer's own row), and so do
    the entries of the teams in `team_ids` (the viewer's team: its entry is theirs too). Only the
    rows returned have their run summaries read, and `datasets` are theirs.
    """
    leagues = league_names(comp)
    if league is None and leagues:
        league = leagues[0]
    settings = phase.leaderboard or {}
    hidden = "none" if sees_all else board_hidden(phase)
    board_order = [] if hidden == "board" else cached_rank_leaderboard(session, phase, league)
    ranked: list[Ranked] = list(board_order)
    stats = (cached_board_statistics(session, phase, league, board_order)
             if hidden == "none" and shows_statistics(phase) else {})
    if hidden == "scores":
        ranked.sort(key=lambda r: (r.row.username, r.row.id))
    window = ranked[offset:None if limit is None else offset + limit]
    shown = {r.row.id for r in window} if user_id is not None else set()
    pinned = [r for r in ranked if user_id is not None and not r.row.is_baseline
              and r.row.id not in shown and (r.row.user_id == user_id
                                             or getattr(r.row, "team_id", None) in team_ids)]
    entries = build_entries(session, window + pinned, details=hidden == "none",
                            protocol=phase_scoring(phase))
    rows = [_row(e, hidden == "scores") for e in entries]
    for row in rows:
        own = stats.get(row["submission_id"])
        row |= {"rank_low": own.rank_low, "rank_high": own.rank_high,
                "tied_group": own.tied_group} if own else {}
    if hidden == "none" and (phase.protocol or {}).get("name") == "id-ood":
        _mark_flips(session, phase, rows)
    datasets = sorted({d for e in entries for d in e.per_dataset}) if hidden == "none" else []
    return {"phase_id": phase.id, "rule": phase.leaderboard_rule,
            "ranking": settings.get("ranking", "score"),
            "columns": settings.get("columns", ["score", "ci95", "per_dataset"]),
            "hidden": board_hidden(phase), "league": league, "leagues": leagues,
            "datasets": datasets, "total": len(ranked), "offset": offset, "limit": limit,
            "scoring": explain_phase_score(phase_scoring(phase), phase.runs_per_submission),
            "statistics": bool(stats),
            "entries": rows[:len(window)], "pinned": rows[len(window):]}


def _mark_flips(session: Any, phase: Phase, rows: list[dict[str, Any]]) -> None:
    """Each id-ood row's `flips`: the shown entries it passes on one of BaseGen / NovelGen and
    trails on the other (Setlur et al. 2021); `flip_stats`: for each, the paired differences
    row − other on both sides and whether the flip is significant (`scoring.flips`)."""
    both = [(r["submission_id"], r["sides"]["BaseGen"], r["sides"]["NovelGen"]) for r in rows
            if {"BaseGen", "NovelGen"} <= set(r["sides"] or {})]
    flips = compute_order_flips(both)
    stats = compute_flip_statistics(session, phase, flips)
    for row in rows:
        row["flips"] = flips.get(row["submission_id"], [])
        own = stats.get(row["submission_id"], {})
        row["flip_stats"] = [{"other": o, **own[o]} for o in row["flips"] if o in own]


def _row(entry: Entry, hide_numbers: bool) -> dict[str, Any]:
    row = {"rank": entry.rank, "username": entry.username, "submission_id": entry.submission_id,
           "score": entry.score, "created_at": entry.created_at, "league": entry.league,
           "ci95": entry.ci95, "ci95_low": entry.ci95_low, "ci95_high": entry.ci95_high,
           "per_dataset": entry.per_dataset,
           "average_rank": entry.average_rank, "is_baseline": entry.is_baseline,
           "is_selected": entry.is_selected, "sides": entry.sides or None, "flips": None,
           "flip_stats": None,
           "team": entry.team, "method": entry.method}
    if hide_numbers:
        row |= {"rank": None, "score": None, "ci95": None, "ci95_low": None, "ci95_high": None,
                "per_dataset": None,
                "average_rank": None, "sides": None}
    return row


def leaderboard_csv(board: dict[str, Any]) -> str:
    """One row per entry: the fixed columns, one per side of a two-sided protocol
    (`side:BaseGen`, ...), then one per dataset."""
    out = io.StringIO()
    writer = csv.writer(out)
    sides = list(dict.fromkeys(k for e in board["entries"] for k in (e.get("sides") or {})))
    extra = CSV_STATISTICS if board.get("statistics") else []
    writer.writerow(CSV_FIXED + extra + [f"side:{k}" for k in sides]
                    + [f"dataset:{d}" for d in board["datasets"]])
    for e in board["entries"]:
        per_dataset, own = e["per_dataset"] or {}, e.get("sides") or {}
        competitor = neutralize_cell(e.get("team") or e["username"])
        text = [neutralize_cell(v) for v in (e["username"], e.get("method") or "",
                                             e["league"] or "")]
        writer.writerow([
            e["rank"], competitor, "team" if e.get("team") else "user", *text,
            e["submission_id"],
            _num(e["score"]), _num(e["ci95"]), _num(e["average_rank"]),
            int(e["is_baseline"]), int(e["is_selected"]), e["created_at"].isoformat(),
            *[e.get(k) if e.get(k) is not None else "" for k in extra],
            *[_num(own.get(k)) for k in sides],
            *[_num(per_dataset.get(d)) for d in board["datasets"]]])
    return out.getvalue()


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6f}"


def leaderboard_json(board: dict[str, Any]) -> bytes:
    """The API's JSON body of `board` (a `view_leaderboard` dict), in the `Leaderboard` schema's
    shape and encoding (pydantic's serializer, without per-entry validation)."""
    return pydantic_core.to_json({k: v for k, v in board.items() if k != "pinned"})


def cached_leaderboard_json(session: Any, phase: Phase, comp: Competition | None,
                            league: str | None, sees_all: bool, *, offset: int = 0,
                            limit: int | None = None) -> bytes:
    """`leaderboard_json(view_leaderboard(...))`, kept while the phase's fingerprint and what
    else the answer shows (hiding, statistics, runs per submission, leagues) hold; computed
    once for concurrent readers of a changed board (the cache's single flight)."""
    view = (league, sees_all, offset, limit, board_hidden(phase), shows_statistics(phase),
            phase.runs_per_submission,
            json.dumps(comp.leagues if comp else None, sort_keys=True, default=str))
    return _answers.get(session, phase, view, lambda: leaderboard_json(view_leaderboard(
        session, phase, comp, league, sees_all, offset=offset, limit=limit)))
