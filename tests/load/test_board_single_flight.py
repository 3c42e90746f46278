"""After a board changes, concurrent readers compute it once (issue 21: 10 readers each
recomputed the board and its statistics, 2.7-5.2 s each). Real sessions on a real database,
one per thread; the computation is slowed so that every reader arrives while it runs."""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import contextlib

from inprocess_support import inprocess_app  # noqa: E402

from server.models import Phase  # noqa: E402
from server.services.leaderboard_cache import FingerprintCache  # noqa: E402

READERS = 10


def test_concurrent_readers_of_a_changed_board_compute_it_once(tmp_path):
    with inprocess_app(tmp_path) as env:
        org = env.token_for("olga", role="organizer")
        phase_id = env.competition(org)["phases"][0]["id"]
        cache: FingerprintCache[str] = FingerprintCache(8)
        computed, started = [], threading.Event()
        arrived = threading.Barrier(READERS)

        def compute() -> str:
            computed.append(1)
            started.set()
            threading.Event().wait(0.5)  # a slow ranking: the others arrive meanwhile
            return "board"

        def read() -> str:
            arrived.wait()
            with env.db.session() as session:
                phase = session.get(Phase, phase_id)
                return cache.get(session, phase, None, compute)

        with ThreadPoolExecutor(READERS) as pool:
            boards = list(pool.map(lambda _: read(), range(READERS)))
        assert boards == ["board"] * READERS
        assert len(computed) == 1


def test_a_failed_computation_lets_the_next_reader_compute(tmp_path):
    with inprocess_app(tmp_path) as env:
        org = env.token_for("olga", role="organizer")
        phase_id = env.competition(org)["phases"][0]["id"]
        cache: FingerprintCache[str] = FingerprintCache(8)
        attempts = []

        def compute() -> str:
            attempts.append(1)
            if len(attempts) == 1:
                raise RuntimeError("the first ranking failed")
            return "board"

        with env.db.session() as session:
            phase = session.get(Phase, phase_id)
            with contextlib.suppress(RuntimeError):
                cache.get(session, phase, None, compute)
            assert cache.get(session, phase, None, compute) == "board"


def test_readers_after_a_change_wait_for_one_rebuild_and_all_get_the_new_board(tmp_path):
    """The board read before a change is kept; a change (here the phase's ranking settings, in
    its fingerprint) makes the next READERS concurrent readers rebuild it once, and each of
    them gets the rebuilt board, none the old one."""
    with inprocess_app(tmp_path) as env:
        org = env.token_for("olga", role="organizer")
        phase_id = env.competition(org)["phases"][0]["id"]
        cache: FingerprintCache[str] = FingerprintCache(8)
        builds: list[str] = []
        version = ["old"]

        def compute() -> str:
            builds.append(version[0])
            threading.Event().wait(0.5)  # a slow ranking: the others arrive meanwhile
            return version[0]

        def read() -> str:
            with env.db.session() as session:
                return cache.get(session, session.get(Phase, phase_id), None, compute)

        assert read() == "old" and read() == "old" and builds == ["old"]
        with env.db.session(write=True) as session:
            phase = session.get(Phase, phase_id)
            phase.leaderboard = {**(phase.leaderboard or {}), "ranking": "average_rank"}
        version[0] = "new"
        arrived = threading.Barrier(READERS)

        def read_together() -> str:
            arrived.wait()
            return read()

        before = cache.computations
        with ThreadPoolExecutor(READERS) as pool:
            boards = list(pool.map(lambda _: read_together(), range(READERS)))
        assert boards == ["new"] * READERS
        assert builds == ["old", "new"] and cache.computations - before == 1
