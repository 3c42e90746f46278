"""The ranked board is kept between requests (issue 14, item 15) but never served stale: a
finished run, a selection, a baseline mark or a disqualification changes what is shown at once,
and an unchanged board is not ranked again."""

from __future__ import annotations

from test_pages import finish

from server.models import Phase, Submission
from server.services import leaderboard_cache, leaderboard_view


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


def test_the_kept_json_answer_is_per_viewer_and_never_outlives_a_change(env):
    """The API's answer is kept (a second read computes nothing), apart for an organizer and a
    participant of a board that hides its scores, and a change or the phase's hiding setting
    gives the next read a new answer."""
    olga, org = env.user("olga", role="organizer")
    phase_id = env.phase(owner=olga, leaderboard={"hidden": "scores"}).id
    _, ann = env.user("ann")
    first = env.submit(phase_id, ann).json()["id"]
    finish(env, first, score=0.4)
    url = f"/api/v1/phases/{phase_id}/leaderboard"

    def scores(headers: dict[str, str]) -> list[float | None]:
        entries = env.client.get(url, headers=headers).json()["entries"]
        return [None if e["score"] is None else round(e["score"], 6) for e in entries]

    start = leaderboard_view._answers.computations
    assert scores(ann) == [None] and scores(org) == [0.4] and scores(ann) == [None]
    assert scores(org) == [0.4] and leaderboard_view._answers.computations - start == 2
    with env.db.session() as s:
        s.get(Submission, first).score = 0.6
    assert scores(org) == [0.6]
    with env.db.session() as s:
        s.get(Phase, phase_id).leaderboard = {"hidden": "none"}
    assert scores(ann) == [0.6]
