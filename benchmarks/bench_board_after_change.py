"""The first leaderboard read after a change, at 10,000 submissions (issue 38.4): server CPU
(this process's `time.process_time`, so other load on the host counts less than wall time) of
the HTML page's board right after one submission's score changed, and 50 readers arriving
together after a change (how many boards they computed: `board_computations()`, and their
wall time).

    .venv/bin/python benchmarks/bench_board_after_change.py [--submissions 10000] [--rounds 8]

"before" and "now" run interleaved in one process on one database: "before" ranks the whole
board again after every change (the code at 2eff17d: every candidate read, chosen and ranked),
"now" is the code as it is (the kept board updated from the submissions that changed,
`server/services/leaderboard_delta.py`). The ratio before/now comes from the
same machine state; on a host shared with other jobs absolute figures drift, ratios less.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
PG_ADMIN_URL = os.environ.get("ARENA_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


BEFORE: dict = {}


def use(variant: str) -> None:
    """Switch the leaderboard code to 'before' (every change ranks the board whole, as at
    2eff17d) or 'now' (the kept board is updated from the rows that changed)."""
    from server.services import leaderboard_cache

    BEFORE.setdefault("update", leaderboard_cache.update_board)
    leaderboard_cache.update_board = ((lambda *a: None) if variant == "before"
                                      else BEFORE["update"])


def change(db, phase_id: int, step: int) -> None:
    """One submission of the phase gets a new score (the board's fingerprint moves)."""
    from sqlalchemy import select, update

    from server.models import Submission

    with db.session(write=True) as s:
        sid = s.scalars(select(Submission.id).where(Submission.phase_id == phase_id)
                        .order_by(Submission.id).offset(step % 500).limit(1)).one()
        s.execute(update(Submission).where(Submission.id == sid)
                  .values(score=0.25 + (step % 97) / 200))


def read_board(db, phase_id: int) -> None:
    from server.models import Phase
    from server.web.views import leaderboards

    with db.session() as s:
        leaderboards(s, s.get(Phase, phase_id), False)


def first_read_cpu_ms(db, phase_id: int, step: int) -> float:
    change(db, phase_id, step)
    start = time.process_time()
    read_board(db, phase_id)
    return (time.process_time() - start) * 1000


def readers_after_change(db, phase_id: int, step: int, readers: int) -> tuple[int, float]:
    """`readers` threads read the board together right after a change: (boards computed,
    median wall ms of a reader)."""
    from server.services.leaderboard_cache import board_computations

    change(db, phase_id, step)
    read_board(db, phase_id)  # the board as kept before the change
    change(db, phase_id, step + 1)
    barrier, walls = threading.Barrier(readers), []
    before = board_computations()

    def reader() -> None:
        barrier.wait()
        start = time.perf_counter()
        read_board(db, phase_id)
        walls.append((time.perf_counter() - start) * 1000)

    threads = [threading.Thread(target=reader) for _ in range(readers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return board_computations() - before, statistics.median(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--readers", type=int, default=50)
    args = parser.parse_args()

    import psycopg
    from bench_leaderboard import _NoJobs, fill

    from server.app import create_app
    from server.core.config import Settings
    from server.core.db import upgrade_database

    admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=3)
    name = f"arena_bench_{uuid.uuid4().hex[:10]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    url = PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
    url = f"{url}/{name}"
    try:
        upgrade_database(url)
        with tempfile.TemporaryDirectory(prefix="arena-bench-board-") as tmp:
            app = create_app(Settings(data_dir=Path(tmp), database_url=url, auto_migrate=False,
                                      reconcile_interval_s=0, db_pool_size=60), queue=_NoJobs())
            db = app.state.db
            phase_id = fill(db, args.submissions, args.submissions)
            with db.engine.begin() as conn:
                conn.exec_driver_sql("ANALYZE")
            read_board(db, phase_id)  # warm-up
            cpu: dict[str, list[float]] = {"before": [], "now": []}
            warm: dict[str, list[float]] = {"before": [], "now": []}
            step = 0
            for _ in range(args.rounds):
                for variant in ("before", "now"):
                    use(variant)
                    step += 1
                    cpu[variant].append(first_read_cpu_ms(db, phase_id, step))
                    start = time.process_time()
                    read_board(db, phase_id)
                    warm[variant].append((time.process_time() - start) * 1000)
            flights = {}
            for variant in ("before", "now"):
                use(variant)
                step += 1
                flights[variant] = readers_after_change(db, phase_id, step, args.readers)
            step += 1
            use("now")
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
    load = os.getloadavg()[0]
    print(f"{args.submissions:,} submissions, {args.rounds} interleaved rounds, load {load:.1f}")
    print(f"{'board (HTML page 1)':<34}{'before ms':>11}{'now ms':>9}{'before/now':>12}")
    for label, table in (("first read after a change, CPU", cpu), ("warm read, CPU", warm)):
        b, n = statistics.median(table["before"]), statistics.median(table["now"])
        print(f"{label:<34}{b:>11.1f}{n:>9.1f}{b / n:>11.2f}x")
    from server.services.leaderboard_cache import board_computation_kinds

    print(f"boards computed in the whole run: {board_computation_kinds()}")
    for variant, (computed, wall) in flights.items():
        print(f"{args.readers} readers after a change ({variant}): {computed} board computed, "
              f"median reader wall {wall:.0f} ms")


if __name__ == "__main__":
    main()
