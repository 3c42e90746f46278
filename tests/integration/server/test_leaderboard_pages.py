"""Leaderboard windows: `limit`/`offset` on the API and pages of the HTML board, with ranks of
the whole board and the signed-in participant's own row always shown."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlalchemy import insert, select

from server.models import Run, Submission, User

N_ENTRIES = 25


def fill_board(env, phase_id: int, n: int = N_ENTRIES) -> list[str]:
    """`n` participants with one finished submission each, scores falling with the index;
    returns the usernames in rank order."""
    names = [f"p{i:03d}" for i in range(n)]
    t0 = env.clock.now
    with env.db.session(write=True) as s:
        taken = set(s.scalars(select(User.username).where(User.username.in_(names))))
        s.execute(insert(User), [{"username": u, "role": "participant", "created_at": t0}
                                 for u in names if u not in taken])
        ids = dict(s.execute(select(User.username, User.id).where(User.username.in_(names))).all())
        s.execute(insert(Submission), [
            {"phase_id": phase_id, "user_id": ids[u], "sha256": "0" * 64, "size_bytes": 1,
             "storage_path": "x", "state": "finished", "score": 1.0 - i / 100,
             "created_at": t0 + timedelta(seconds=i)} for i, u in enumerate(names)])
        subs = s.execute(select(Submission.id, Submission.score)
                         .where(Submission.phase_id == phase_id)).all()
        s.execute(insert(Run), [
            {"submission_id": sid, "index": 0, "seed": 0, "state": "finished", "score": score,
             "summary": {"mean": score, "ci95": 0.01,
                         "per_dataset": {"d1": {"mean": score, "ci95": 0.1, "n": 5}}},
             "created_at": t0} for sid, score in subs])
    return names


def board(env, phase_id: int, query: str = "") -> dict:
    answer = env.client.get(f"/api/v1/phases/{phase_id}/leaderboard{query}")
    assert answer.status_code == 200, answer.text
    return answer.json()


@pytest.mark.parametrize(("limit", "offset"), [(10, 0), (10, 10), (10, 20), (7, 3), (5, 24),
                                               (5, 25), (100, 0)])
def test_api_window_is_the_slice_of_the_whole_board_with_its_ranks(env, limit, offset):
    phase = env.phase()
    fill_board(env, phase.id)
    whole = board(env, phase.id)
    window = board(env, phase.id, f"?limit={limit}&offset={offset}")
    assert window["entries"] == whole["entries"][offset:offset + limit]
    assert [e["rank"] for e in window["entries"]] == list(
        range(offset + 1, min(offset + limit, N_ENTRIES) + 1))
    assert (window["total"], window["offset"], window["limit"]) == (N_ENTRIES, offset, limit)


def test_api_without_limit_returns_the_whole_board_as_before(env):
    phase = env.phase()
    names = fill_board(env, phase.id)
    whole = board(env, phase.id)
    assert [e["username"] for e in whole["entries"]] == names
    assert whole["total"] == N_ENTRIES and whole["limit"] is None and whole["offset"] == 0
    first = whole["entries"][0]
    # the score's interval is stratified over datasets (here one: that dataset's own interval),
    # not the summary's all-task "ci95"
    assert first["ci95"] == pytest.approx(0.1) and first["per_dataset"] == {"d1": 1.0}
    assert whole["datasets"] == ["d1"] and first["created_at"].endswith("Z")


def test_api_window_ranks_by_average_rank_across_the_whole_board(env):
    phase = env.phase(leaderboard={"ranking": "average_rank"})
    fill_board(env, phase.id)
    whole = board(env, phase.id)
    window = board(env, phase.id, "?limit=5&offset=5")
    assert window["entries"] == whole["entries"][5:10]
    assert window["entries"][0]["average_rank"] is not None


@pytest.mark.parametrize("query", ["?limit=0", "?offset=-1", "?limit=x"])
def test_api_rejects_a_bad_window(env, query):
    phase = env.phase()
    assert env.client.get(f"/api/v1/phases/{phase.id}/leaderboard{query}").status_code == 422


def ranks_and_names(html: str) -> list[tuple[int, str]]:
    return [(int(r), n) for r, n in re.findall(
        r'<td class="num" data-sort="(\d+)">\d+</td>\s*<td>(p\d+)', html)]


def test_page_shows_top_rows_and_links_to_the_other_pages(env):
    phase = env.phase()
    names = fill_board(env, phase.id)
    html = env.client.get(f"/phases/{phase.id}/leaderboard?per_page=10").text
    assert ranks_and_names(html) == list(zip(range(1, 11), names[:10], strict=True))
    assert "25 entries, page 1 of 3" in html
    assert 'href="?per_page=10&amp;page=2" rel="next"' in html
    assert 'href="?per_page=10&amp;page=3"' in html and 'rel="prev"' not in html
    last = env.client.get(f"/phases/{phase.id}/leaderboard?per_page=10&page=3").text
    assert ranks_and_names(last) == list(zip(range(21, 26), names[20:], strict=True))
    assert 'rel="prev"' in last and 'rel="next"' not in last


def test_page_default_is_100_rows_without_page_links_for_a_small_board(env):
    phase = env.phase()
    fill_board(env, phase.id)
    html = env.client.get(f"/phases/{phase.id}/leaderboard").text
    assert len(ranks_and_names(html)) == N_ENTRIES and 'class="pages"' not in html


def test_page_always_shows_the_signed_in_participants_own_row(env):
    phase = env.phase()
    _, headers = env.user("p017")
    fill_board(env, phase.id)
    html = env.client.get(f"/phases/{phase.id}/leaderboard?per_page=10", headers=headers).text
    pinned = html.split('<tbody class="pinned"', 1)[1]
    assert ranks_and_names(pinned) == [(18, "p017")] and 'class="own"' in pinned
    on_page = env.client.get(f"/phases/{phase.id}/leaderboard?per_page=10&page=2",
                             headers=headers).text
    assert 'tbody class="pinned"' not in on_page and (18, "p017") in ranks_and_names(on_page)
    anonymous = env.client.get(f"/phases/{phase.id}/leaderboard?per_page=10").text
    assert 'tbody class="pinned"' not in anonymous
