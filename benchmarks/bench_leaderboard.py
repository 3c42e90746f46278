"""Reading the leaderboard with 10,000 submissions in the database: ms per request (median, p95)
of the JSON API and of the HTML page, SQL statements per request, and the query plans.

    .venv/bin/python benchmarks/bench_leaderboard.py [--submissions 10000] [--users 1000,10000]
                                                     [--requests 30]

A throwaway Postgres database (ARENA_TEST_PG, the tests' admin URL) is migrated and filled by
bulk inserts through SQLAlchemy: for each `--users` value one phase with `--submissions`
finished submissions spread over that many participants (so 1,000 users gives a board of 1,000
entries chosen among 10 submissions each; 10,000 gives 10,000 entries), one finished run per
submission with a realistic summary (10 datasets, per-ways and per-shots tables), plus as many
queued/failed submissions in another phase, so that indexes must pick the phase's rows.
Requests go through the real app in process (`fastapi.testclient.TestClient`, no sockets), as
an anonymous viewer; every alternative is timed in interleaved rounds. "(before)" rows run the
same app with the summary read as it was before the fix (every run's whole summary decoded),
the leaderboard code of BEFORE_COMMIT (whole board, every entry validated, every row rendered)
on routes of their own, so the before/now ratio comes from one run on one machine state. The
HTML page now shows 100 rows (page 1); "limit=100" is the API's first page.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PG_ADMIN_URL = os.environ.get("ARENA_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")
DATASETS = [f"domain_{i}" for i in range(10)]


def make_summary(rng, mean: float) -> dict:
    """A real `summarize_run(...).to_dict()` of 100 tasks over the 10 datasets (~6 KB of JSON)."""
    from submission_api.scoring import summarize_run
    from submission_api.scoring.records import TaskRecord

    records = [TaskRecord(id=i, dataset=DATASETS[i % len(DATASETS)], group="test",
                          n_ways=int(rng.integers(2, 21)), n_shots=int(rng.integers(1, 21)),
                          score=float(rng.uniform(0, 1)), accuracy=0.5, worst_class_accuracy=0.1)
               for i in range(100)]
    summary = summarize_run(records).to_dict()
    summary["mean"] = mean
    return summary


def fill(db, n_submissions: int, n_users: int, seed: int = 0) -> int:
    """One phase with `n_submissions` finished submissions of `n_users` users; returns its id."""
    import numpy as np
    from sqlalchemy import insert, select

    from server.models import Competition, Phase, Run, Submission, User

    rng = np.random.default_rng(seed)
    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    tag = uuid.uuid4().hex[:6]
    with db.session(write=True) as s:
        comp = Competition(slug=f"bench-{tag}", title="Bench", created_at=t0)
        s.add(comp)
        s.flush()
        phase = Phase(competition_id=comp.id, name="dev", status="open", created_at=t0,
                      leaderboard_rule="best", leaderboard={})
        s.add(phase)
        s.flush()
        s.execute(insert(User), [{"username": f"u{tag}-{i}", "role": "participant",
                                  "created_at": t0} for i in range(n_users)])
        user_ids = list(s.scalars(select(User.id).where(User.username.like(f"u{tag}-%"))))
        scores = rng.uniform(0, 1, n_submissions)
        rows = [{"phase_id": phase.id, "user_id": user_ids[i % n_users], "sha256": "0" * 64,
                 "size_bytes": 1000, "storage_path": "x", "state": "finished",
                 "score": float(scores[i]), "created_at": t0 + timedelta(seconds=i),
                 "finished_at": t0 + timedelta(seconds=i + 60)} for i in range(n_submissions)]
        s.execute(insert(Submission), rows)
        sub_ids = list(s.scalars(select(Submission.id).where(Submission.phase_id == phase.id)
                                 .order_by(Submission.id)))
        template = make_summary(rng, 0.0)
        runs = [{"submission_id": sid, "index": 0, "seed": 0, "state": "finished",
                 "score": float(scores[i]), "summary": {**template, "mean": float(scores[i])},
                 "log": "x" * 2000, "created_at": t0, "started_at": t0, "finished_at": t0}
                for i, sid in enumerate(sub_ids)]
        for start in range(0, len(runs), 2000):
            s.execute(insert(Run), runs[start:start + 2000])
        return phase.id


def fill_noise(db, n_submissions: int) -> None:
    """Another phase's queued and failed submissions (rows the leaderboard must skip)."""
    from sqlalchemy import insert, select

    from server.models import Competition, Phase, Submission, User

    t0 = datetime(2030, 1, 1, tzinfo=UTC)
    with db.session(write=True) as s:
        comp = Competition(slug=f"noise-{uuid.uuid4().hex[:6]}", title="Noise", created_at=t0)
        s.add(comp)
        s.flush()
        phase = Phase(competition_id=comp.id, name="dev", status="open", created_at=t0)
        s.add(phase)
        s.flush()
        user_id = s.scalars(select(User.id).limit(1)).first()
        s.execute(insert(Submission), [
            {"phase_id": phase.id, "user_id": user_id, "sha256": "0" * 64, "size_bytes": 1,
             "storage_path": "x", "state": "failed" if i % 2 else "queued",
             "created_at": t0} for i in range(n_submissions)])


class StatementCounter:
    def __init__(self, engine) -> None:
        from sqlalchemy import event

        self.count = 0
        event.listen(engine, "before_cursor_execute", self._on_execute)

    def _on_execute(self, *args) -> None:
        self.count += 1


BEFORE_COMMIT = "c0acde4"
"""The last commit with the whole-board leaderboard (every summary read, pydantic-validated
JSON, the HTML page rendering every entry): the "(before)" rows run its code."""


def _module_from_git(name: str, path: str, swaps: dict):
    """`path` as it was at BEFORE_COMMIT, imported as module `name`; while it runs, `swaps`
    replace entries of sys.modules (so its imports of sibling modules get the old ones)."""
    import subprocess
    import types

    source = subprocess.run(["git", "show", f"{BEFORE_COMMIT}:{path}"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    saved = {key: sys.modules.get(key) for key in swaps}
    sys.modules.update(swaps)
    try:
        exec(compile(source, f"{BEFORE_COMMIT}:{path}", "exec"), module.__dict__)  # noqa: S102
    finally:
        for key, value in saved.items():
            sys.modules[key] = value
    return module


def add_before_routes(app) -> None:
    """/bench/before/api/{id} and /bench/before/html/{id}: the leaderboard of BEFORE_COMMIT."""
    import subprocess

    from fastapi import Request
    from jinja2 import ChoiceLoader, DictLoader

    from server.api.deps import SessionDep
    from server.models import Competition, Phase
    from server.schemas.submission import Leaderboard
    from server.web.rendering import render, templates

    lb = _module_from_git("lb_before", "server/services/leaderboard.py", {})
    view = _module_from_git("lb_view_before", "server/services/leaderboard_view.py",
                            {"server.services.leaderboard": lb})
    web = _module_from_git("web_views_before", "server/web/views.py",
                           {"server.services.leaderboard_view": view})
    page = subprocess.run(["git", "show", f"{BEFORE_COMMIT}:server/templates/leaderboard.html"],
                          cwd=ROOT, check=True, capture_output=True, text=True).stdout
    templates.env.loader = ChoiceLoader([DictLoader({"leaderboard_before.html": page}),
                                         templates.env.loader])

    def before_api(phase_id: int, session: SessionDep) -> Leaderboard:
        phase = session.get(Phase, phase_id)
        comp = session.get(Competition, phase.competition_id)
        return Leaderboard.model_validate(view.view_leaderboard(session, phase, comp, None, False))

    def before_html(phase_id: int, request: Request, session: SessionDep):
        phase = session.get(Phase, phase_id)
        return render(request, "leaderboard_before.html", None, app.state.settings, phase=phase,
                      staff=False, ranking=(phase.leaderboard or {}).get("ranking"),
                      boards=web.leaderboards(session, phase, False))

    # this module's annotations are strings (PEP 563) that FastAPI cannot resolve here
    before_api.__annotations__ = {"phase_id": int, "session": SessionDep, "return": Leaderboard}
    before_html.__annotations__ = {"phase_id": int, "request": Request, "session": SessionDep}
    app.add_api_route("/bench/before/api/{phase_id}", before_api, response_model=Leaderboard)
    app.add_api_route("/bench/before/html/{phase_id}", before_html)


def time_requests(client, urls: dict[str, str], rounds: int, counter) -> dict[str, dict]:
    """Interleaved rounds of GETs; per alternative (name -> path) the ms of each, statements
    per request and the answer's size."""
    out = {name: {"ms": [], "statements": 0, "bytes": 0} for name in urls}
    for url in urls.values():  # warm-up (templates, caches)
        answer = client.get(url)
        assert answer.status_code == 200, (url, answer.status_code, answer.text[:300])
    for _ in range(rounds):
        for name, url in urls.items():
            before = counter.count
            start = time.perf_counter()
            answer = client.get(url)
            out[name]["ms"].append((time.perf_counter() - start) * 1000)
            out[name]["statements"] = counter.count - before
            out[name]["bytes"] = len(answer.content)
    return out


def explain(db, phase_id: int) -> list[str]:
    """Postgres plans of the leaderboard's two queries for this phase."""
    from sqlalchemy import text
    from sqlalchemy.dialects import postgresql

    from server.models import Phase
    from server.services import leaderboard as lb

    lines = []
    with db.session() as s:
        phase = s.get(Phase, phase_id)
        rows = lb.choose_entries(lb._candidates(s, phase, None), phase.leaderboard_rule)
        captured = []

        def grab(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001
            captured.append((statement, parameters))

        from sqlalchemy import event

        event.listen(s.get_bind(), "before_cursor_execute", grab)
        try:
            lb._candidates(s, phase, None)
            lb.worst_run_summaries(s, [r.id for r in rows])
        finally:
            event.remove(s.get_bind(), "before_cursor_execute", grab)
        assert postgresql  # the statements are psycopg's own, with %(name)s parameters
        for statement, parameters in captured:
            plan = s.connection().exec_driver_sql(
                "EXPLAIN (ANALYZE, BUFFERS OFF, TIMING OFF) " + statement, parameters).all()
            lines.append(statement.split("\n")[0][:100] + " ...")
            lines += ["    " + r[0] for r in plan]
        s.execute(text("SELECT 1"))
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--submissions", type=int, default=10_000)
    parser.add_argument("--users", default="1000,10000", help="comma-separated; one phase each")
    parser.add_argument("--requests", type=int, default=30)
    parser.add_argument("--no-reference", dest="reference", action="store_false",
                        help=f"skip the code of {BEFORE_COMMIT} (timed alongside by default)")
    parser.add_argument("--keep", action="store_true", help="keep the database (prints its URL)")
    args = parser.parse_args()

    import tempfile

    import psycopg
    from fastapi.testclient import TestClient

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
        with tempfile.TemporaryDirectory(prefix="arena-bench-lb-") as tmp:
            settings = Settings(data_dir=Path(tmp), database_url=url, auto_migrate=False,
                                reconcile_interval_s=0)
            app = create_app(settings, queue=_NoJobs())
            if args.reference:
                add_before_routes(app)
            db = app.state.db
            phases = {}
            start = time.perf_counter()
            for users in (int(u) for u in args.users.split(",")):
                phases[users] = fill(db, args.submissions, users)
            fill_noise(db, args.submissions)
            with db.engine.begin() as conn:
                conn.exec_driver_sql("ANALYZE")
            print(f"filled {len(phases)} phase(s) x {args.submissions:,} submissions (+ "
                  f"{args.submissions:,} in another phase) in {time.perf_counter() - start:.0f} s")
            counter = StatementCounter(db.engine)
            with TestClient(app) as client:
                urls = {}
                for users, pid in phases.items():
                    api, page = f"/api/v1/phases/{pid}/leaderboard", f"/phases/{pid}/leaderboard"
                    urls[f"API  {users:>6} users"] = api
                    urls[f"API  {users:>6} users limit=100"] = f"{api}?limit=100"
                    urls[f"HTML {users:>6} users"] = page
                    if args.reference:
                        urls[f"API  {users:>6} users (before)"] = f"/bench/before/api/{pid}"
                        urls[f"HTML {users:>6} users (before)"] = f"/bench/before/html/{pid}"
                results = time_requests(client, urls, args.requests, counter)
            print(f"\n{'request':<36}{'median ms':>11}{'p95 ms':>9}{'SQL/req':>9}{'KiB':>9}"
                  f"{'before/now':>12}")
            for what, r in results.items():
                ms = sorted(r["ms"])
                p95 = ms[min(len(ms) - 1, int(round(0.95 * (len(ms) - 1))))]
                ratio = ""
                if what.endswith("(before)"):
                    now = results[what.removesuffix(" (before)")]["ms"]
                    ratio = f"{statistics.median(ms) / statistics.median(now):.2f}x"
                print(f"{what:<36}{statistics.median(ms):>11.1f}{p95:>9.1f}"
                      f"{r['statements']:>9}{r['bytes'] / 1024:>9.0f}{ratio:>12}")
            print("\nquery plans (the largest phase):")
            print("\n".join(explain(db, phases[max(phases)])))
    finally:
        if args.keep:
            print(f"kept {url}")
        else:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


class _NoJobs:
    """A job queue that sends nothing: the benchmark reads boards, it evaluates no run."""

    def enqueue(self, run_id: int, run_token: str, queue: str, countdown_s: float = 0.0) -> None:
        pass

    def pending_runs(self, queue: str) -> set[int] | None:
        return None


if __name__ == "__main__":
    main()

