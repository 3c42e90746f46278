"""After a change the kept board is updated from the rows that changed (issue 38.4,
`leaderboard_delta`), and the updated board is always the one a whole ranking gives: random
changes of every kind that decides the board (scores, selections, baselines,
disqualifications, teams, leagues, new, failed and deleted submissions), each followed by a
read that must equal `rank_leaderboard` from scratch. On Postgres, where the update applies."""

from __future__ import annotations

import random
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import delete, select

from server.models import Phase, Submission, Team
from server.services import leaderboard_cache
from server.services.leaderboard import rank_leaderboard


def _submission(env, phase_id: int, user_id: int, rng: random.Random, **fields) -> Submission:
    values = {"phase_id": phase_id, "user_id": user_id, "sha256": "0" * 64, "size_bytes": 1,
              "storage_path": "x", "state": "finished", "score": round(rng.random(), 2),
              "created_at": env.clock.now + timedelta(seconds=rng.randrange(20)),  # ties
              "league": rng.choice(["a", "b"])} | fields
    return Submission(**values)


def _board(env, phase_id: int, league: str | None) -> tuple[list, list]:
    """(the kept board as read, the board ranked whole), as (position, row) pairs."""
    with env.db.session() as s:
        phase = s.get(Phase, phase_id)
        kept = [(r.position, r.row) for r in
                leaderboard_cache.cached_rank_leaderboard(s, phase, league)]
        whole = [(r.position, r.row) for r in rank_leaderboard(s, phase, league)]
    return kept, whole


def _change(env, rng: random.Random, phase_id: int, users: list[int], teams: list[int]) -> str:
    """One random change that may move the board; returns what it did."""
    with env.db.session(write=True) as s:
        ids = list(s.scalars(select(Submission.id).where(Submission.phase_id == phase_id)))
        sub = s.get(Submission, rng.choice(ids))
        what = rng.choice(["score", "select", "baseline", "disqualify", "team", "league", "new",
                           "fail", "tie", "delete"])
        if what == "score":
            sub.score = round(rng.random(), 2)
        elif what == "select":
            sub.is_selected = not sub.is_selected
        elif what == "baseline":
            sub.is_baseline = not sub.is_baseline
        elif what == "disqualify":
            sub.disqualified_at = None if sub.disqualified_at else env.clock.now
        elif what == "team":
            sub.team_id = rng.choice([None, *teams])
        elif what == "league":
            sub.league = None if sub.league else rng.choice(["a", "b"])  # set once in the app
        elif what == "new":
            s.add(_submission(env, phase_id, rng.choice(users), rng))
        elif what == "fail":
            sub.state = rng.choice(["failed", "finished", "running"])
        elif what == "tie":  # an equal score (times often tie too): the id breaks the tie
            sub.score = s.get(Submission, rng.choice(ids)).score
        else:
            s.execute(delete(Submission).where(Submission.id == sub.id))
    return what


@pytest.mark.parametrize("rule", ["best", "latest"])
def test_random_changes_update_the_kept_board_to_the_whole_ranking(env, rule):
    rng = random.Random(38 if rule == "best" else 4)
    phase_id = env.phase(leaderboard_rule=rule).id
    users = [env.user(f"u{i}")[0].id for i in range(12)]
    with env.db.session(write=True) as s:
        comp = s.get(Phase, phase_id).competition_id
        made = [Team(competition_id=comp, name=f"t{i}", invite_code=uuid.uuid4().hex)
                for i in range(3)]
        s.add_all(made)
        s.flush()
        teams = [t.id for t in made]
        s.add_all(_submission(env, phase_id, rng.choice(users), rng) for _ in range(60))
    before = leaderboard_cache.board_computation_kinds()
    done = []
    for step in range(160):
        league = (None, "a", "b")[step % 3]
        kept, whole = _board(env, phase_id, league)
        assert kept == whole, f"after {done[-3:]} (league {league})"
        done.append(_change(env, rng, phase_id, users, teams))
    after = leaderboard_cache.board_computation_kinds()
    assert after["updated"] - before["updated"] > 100  # most reads were updates, not rebuilds
    assert after["rebuilt"] - before["rebuilt"] >= 3  # the first read of each league, deletes


def test_a_write_committed_after_the_board_was_read_is_applied(env):
    """A transaction that wrote before the board was read but committed after it has a lower
    id than rows written meanwhile: the update still sees it (the snapshot's oldest running
    transaction, not the newest row, marks where the board stands)."""
    rng = random.Random(5)
    phase_id = env.phase().id
    users = [env.user(f"u{i}")[0].id for i in range(3)]
    with env.db.session(write=True) as s:
        s.add_all(_submission(env, phase_id, u, rng, league=None, score=0.5) for u in users)
    with env.db.session() as s:
        first, second, third = s.scalars(select(Submission.id).order_by(Submission.id))
    assert _board(env, phase_id, None)[0]  # kept
    with env.db.session(write=True) as slow:
        slow.get(Submission, first).score = 0.9
        slow.flush()  # its transaction holds an id now and stays open
        with env.db.session(write=True) as fast:
            fast.get(Submission, second).score = 0.7
        kept, whole = _board(env, phase_id, None)
        assert kept == whole and [row.id for _, row in kept][0] == second
    kept, whole = _board(env, phase_id, None)
    assert kept == whole and [row.id for _, row in kept] == [first, second, third]
