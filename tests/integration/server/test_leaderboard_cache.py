"""The ranked board is kept between requests (issue 14, item 15) but never served stale: a
finished run, a selection, a baseline mark or a disqualification changes what is shown at once,
and an unchanged board is not ranked again."""

from __future__ import annotations

from test_pages import finish

from server.models import Submission
from server.services import leaderboard_cache


def test_the_board_is_reused_until_something_that_decides_it_changes(env):
    start = leaderboard_cache.board_computations()  # ranked whole or updated from a change

    def computed() -> int:
        return leaderboard_cache.board_computations() - start

    phase_id = env.phase().id
    _, ann = env.user("ann")
    _, bob = env.user("bob")
    first = env.submit(phase_id, ann).json()["id"]
    finish(env, first, score=0.4)

    def board() -> list[tuple[str, int]]:
        rows = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard").json()["entries"]
        return [(e["username"], e["submission_id"]) for e in rows]

    assert board() == [("ann", first)]
    assert board() == [("ann", first)] and computed() == 1  # reused, not ranked again

    env.clock.advance(minutes=1)
    second = env.submit(phase_id, bob).json()["id"]
    assert board() == [("ann", first)]  # bob's is only queued
    finish(env, second, score=0.7)
    assert board() == [("bob", second), ("ann", first)]

    with env.db.session() as s:
        s.get(Submission, second).disqualified_at = env.clock.now
    assert board() == [("ann", first)]
    with env.db.session() as s:
        s.get(Submission, second).disqualified_at = None
        s.get(Submission, first).is_baseline = True
    assert board()[0] == ("bob", second) and computed() == 5
    env.clock.advance(seconds=1)
    assert board() and computed() == 5
