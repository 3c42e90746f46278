"""A phase's ranked board brought up to date from the submissions that changed since it was read,
instead of read and ranked whole again (issue 38.4).

After one run finishes on a 10,000-entry board, re-reading every candidate (psycopg decoding
10,000 rows of 12 columns), choosing and ranking them all was most of the first read's server
CPU. A `BoardState` keeps what the ranking was made from: every candidate row, the
representative of each entry (a user, a team, a baseline) and the entries' sort keys in rank
order. When the phase's fingerprint moves, `update_board` reads only the rows whose current
version the kept state may not have seen, applies them to a copy, re-chooses the representative
of the entries they touch and moves those entries in the order (bisect).

Which rows changed, on Postgres: every row version carries the id of the transaction that wrote
it (`xmin`). A version the state did not see was written by a transaction still running or not
yet begun when the state was read, whose id is therefore at least that read's snapshot `xmin`
(the oldest transaction then running). So the state keeps its read's snapshot xmin as its
watermark, and the delta is the phase's rows whose `xmin` follows it (modulo 2^32, as Postgres
compares ids; rows frozen long ago may come back too, which costs a re-read and is harmless).
The same statement counts the phase's candidates: a mismatch with the state after applying
(a deleted submission) falls back to a whole rebuild, as do other databases (SQLite), boards
ranked by average rank (one score moves every dataset's ranks), a watermark more than 2^30
transactions old, and more than `MAX_CHANGED` changed rows.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import BigInteger, Select, func, literal_column, select, true
from sqlalchemy.orm import Session

from server.models import Phase, Submission
from server.services.leaderboard import (
    Candidate,
    Ranked,
    candidate_filter,
    candidate_select,
    choose_entries,
    choose_representative,
    entry_key,
    rank_leaderboard,
    tie_key,
)
from server.services.scores import lower_is_better, phase_scoring
from submission_api.scoring.ranking import rank_by_score

XID_SPAN = 1 << 32
"""Transaction ids in a row's `xmin`: 32 bits, compared modulo 2^32."""
MAX_AGE = 1 << 30
"""A watermark older than this many transactions is not trusted (ids wrap at 2^31 ahead)."""
MAX_CHANGED = 1_000
"""More changed rows than this: rank the board whole (it costs about the same)."""
SNAPSHOT_XMIN = "pg_snapshot_xmin(pg_current_snapshot())::text::bigint"

EntryKey = tuple[str, int]
SortKey = tuple[float, tuple[Any, int]]


@dataclass(frozen=True)
class BoardState:
    """A ranked board and what it was ranked from. `watermark` is None where the board can only
    be rebuilt whole (not Postgres, or ranked by average rank)."""

    ranked: list[Ranked]
    settings: tuple[str, bool, str]
    watermark: int | None = None
    rows: dict[int, Candidate] | None = None
    members: dict[EntryKey, dict[int, Candidate]] | None = None
    entries: dict[EntryKey, SortKey] | None = None
    order: list[SortKey] | None = None


def _settings(phase: Phase) -> tuple[str, bool, str]:
    ranking = str((phase.leaderboard or {}).get("ranking", "score"))
    return (phase.leaderboard_rule, not lower_is_better(phase_scoring(phase)), ranking)


def _sort_key(row: Candidate, higher: bool) -> SortKey:
    return ((-1.0 if higher else 1.0) * row.score, tie_key(row))


def _snapshot_xmin(session: Session) -> int | None:
    if session.get_bind().dialect.name != "postgresql":
        return None
    return int(session.execute(select(literal_column(SNAPSHOT_XMIN))).scalar_one())


def build_board(session: Session, phase: Phase, league: str | None,
                candidates: Any) -> BoardState:
    """The whole board, ranked from every candidate row (`candidates(session, phase, league)`),
    kept with what an update needs."""
    settings = _settings(phase)
    rule, higher, ranking = settings
    if ranking == "average_rank":
        return BoardState(rank_leaderboard(session, phase, league), settings)
    watermark = _snapshot_xmin(session)  # before the read: the delta may repeat, never miss
    rows: list[Candidate] = candidates(session, phase, league)
    chosen = choose_entries(rows, rule)
    ranked_ids = rank_by_score([(r.id, tie_key(r), r.score) for r in chosen], higher)
    by_id = {r.id: r for r in rows}
    ranked = [Ranked(item.position, by_id[item.entry_id], None, None) for item in ranked_ids]
    if watermark is None:
        return BoardState(ranked, settings)
    members: dict[EntryKey, dict[int, Candidate]] = {}
    for row in rows:
        if not row.is_baseline:
            members.setdefault(entry_key(row), {})[row.id] = row
    order = [_sort_key(r.row, higher) for r in ranked]
    entries = {entry_key(r.row): key for r, key in zip(ranked, order, strict=True)}
    return BoardState(ranked, settings, watermark, by_id, members, entries, order)


def _delta_query(phase: Phase, league: str | None,
                 watermark: int) -> Select[*tuple[Any, ...]]:
    """One statement (one snapshot): its snapshot xmin, the phase's candidate count, and every
    row of the phase written since `watermark` (whether it is a candidate now)."""
    xmin = literal_column(f"{Submission.__tablename__}.xmin::text::bigint", BigInteger)
    since = ((xmin - watermark % XID_SPAN) % XID_SPAN + XID_SPAN) % XID_SPAN < XID_SPAN // 2
    keep = candidate_filter(league)
    changed = (candidate_select().add_columns(keep.label("keep"))
               .where(Submission.phase_id == phase.id, since).subquery())
    count = select(func.count()).where(Submission.phase_id == phase.id, keep).scalar_subquery()
    head = select(literal_column(SNAPSHOT_XMIN).label("snap"), count.label("candidates")).subquery()
    return select(head, changed).select_from(head.outerjoin(changed, true()))


def update_board(session: Session, phase: Phase, league: str | None,
                 old: BoardState) -> BoardState | None:
    """`old` with the phase's rows changed since it was read applied, or None when only a
    whole rebuild will do (see the module's docstring)."""
    settings = _settings(phase)
    if (old.watermark is None or old.settings != settings or old.rows is None
            or old.members is None or old.entries is None or old.order is None):
        return None
    result = session.execute(_delta_query(phase, league, old.watermark)).all()
    snap, count = int(result[0].snap), int(result[0].candidates)
    changed = [r for r in result if r.id is not None]
    if snap - old.watermark >= MAX_AGE or len(changed) > MAX_CHANGED:
        return None
    rule, higher, _ = settings
    rows, members = dict(old.rows), dict(old.members)
    entries, order = dict(old.entries), list(old.order)
    touched: set[EntryKey] = set()
    for found in changed:
        row = Candidate._make(found[2:-1])
        if found.keep and (not isinstance(row.score, int | float) or math.isnan(row.score)):
            raise ValueError(f"submission {row.id}: received score {row.score!r}; expected a "
                             "number. Fix: a finished submission's score must be a number")
        for version in (rows.pop(row.id, None), row if found.keep else None):
            if version is None:
                continue
            key = entry_key(version)
            touched.add(key)
            if not version.is_baseline:
                group = members[key] = dict(members.get(key, {}))
                if version is row:
                    group[row.id] = row
                else:
                    group.pop(row.id, None)
        if found.keep:
            rows[row.id] = row
    if len(rows) != count:
        return None  # a submission left the phase without a version to say so (deleted)
    for key in touched:
        place = entries.pop(key, None)
        if place is not None:
            del order[bisect.bisect_left(order, place)]
        if key[0] == "baseline":
            now = rows.get(key[1])
            now = now if now is not None and now.is_baseline else None
        else:
            group = members.get(key) or {}
            if not group:
                members.pop(key, None)
            now = choose_representative(group.values(), rule)
        if now is not None:
            entries[key] = _sort_key(now, higher)
            bisect.insort(order, entries[key])
    ranked = [Ranked(position, rows[key[1][1]], None, None)
              for position, key in enumerate(order, start=1)]
    return BoardState(ranked, settings, snap, rows, members, entries, order)
