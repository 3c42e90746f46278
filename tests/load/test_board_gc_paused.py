"""The board's ranking runs with the cyclic collector paused (issue 38.4: collecting during the
~100,000 acyclic allocations of a 10,000-entry ranking was ~90 ms of ~260 ms of server CPU),
and the collector is back on once the board is built."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
from inprocess_support import inprocess_app  # noqa: E402

from server.models import Phase  # noqa: E402
from server.services import leaderboard_cache  # noqa: E402


def test_the_ranking_runs_with_the_collector_paused(tmp_path, monkeypatch):
    seen = []
    real = leaderboard_cache.build_board

    def probe(*args):  # noqa: ANN002, ANN202 - the real one, observed
        seen.append(gc.isenabled())
        return real(*args)

    monkeypatch.setattr(leaderboard_cache, "build_board", probe)
    with inprocess_app(tmp_path) as env:
        org = env.token_for("olga", role="organizer")
        phase_id = env.competition(org)["phases"][0]["id"]
        with env.db.session() as session:
            assert leaderboard_cache.cached_rank_leaderboard(
                session, session.get(Phase, phase_id)) == []
    assert seen == [False] and gc.isenabled()
