"""The board after a change (issue 38.4): 50 readers arriving together right after a change
compute the ranked board once, which `board_computations()` counts; and a shown row's interval
reuses its Student-t quantile instead of solving for it on every read (100 quantiles were most
of a board page's server time; benchmarks/bench_board_after_change.py has the figures)."""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from inprocess_support import inprocess_app  # noqa: E402

from server.models import Phase  # noqa: E402
from server.services import leaderboard_cache  # noqa: E402
from submission_api.scoring import ranked_tasks  # noqa: E402
from submission_api.scoring.summary import compute_group_stats  # noqa: E402

READERS = 50


def test_fifty_readers_right_after_a_change_compute_the_board_once(tmp_path, monkeypatch):
    real = leaderboard_cache.build_board
    started = threading.Event()

    def slow_rank(*args):  # noqa: ANN002, ANN202 - the real one, slowed
        started.set()
        threading.Event().wait(0.5)  # every reader arrives while it runs
        return real(*args)

    monkeypatch.setattr(leaderboard_cache, "build_board", slow_rank)
    with inprocess_app(tmp_path) as env:
        org = env.token_for("olga", role="organizer")
        phase_id = env.competition(org)["phases"][0]["id"]
        arrived = threading.Barrier(READERS)

        def read() -> int:
            arrived.wait()
            with env.db.session() as session:
                phase = session.get(Phase, phase_id)
                return len(leaderboard_cache.cached_rank_leaderboard(session, phase))

        before = leaderboard_cache.board_computations()
        with ThreadPoolExecutor(READERS) as pool:
            sizes = list(pool.map(lambda _: read(), range(READERS)))
        assert started.is_set() and sizes == [0] * READERS
        assert leaderboard_cache.board_computations() - before == 1


def test_the_rows_intervals_solve_each_t_quantile_once(monkeypatch):
    rng = np.random.default_rng(3)
    table = {d: compute_group_stats(rng.uniform(0, 1, 10)).to_dict() for d in "ab"}
    solved = []
    real = ranked_tasks.compute_t_quantile

    def counting(level, df):  # noqa: ANN001, ANN202
        solved.append(df)
        return real(level, df)

    monkeypatch.setattr(ranked_tasks, "compute_t_quantile", counting)
    first = ranked_tasks.compute_metric_interval({"per_dataset": table}, "score")
    solved.clear()
    for _ in range(100):  # a page of 100 rows, read again
        assert ranked_tasks.compute_metric_interval({"per_dataset": table}, "score") == first
    assert solved == []
