"""Can the time of a wrong-password answer tell which usernames exist? (issue 33.4)

Wrong passwords for an existing account and for unknown names, interleaved, through the real
route (POST /api/v1/auth/token, in process, SQLite), each from its own client address and
with the per-account limit raised, so the throttle never answers first. At a55d28d only
existing accounts were hashed (measured there: 1,199 ms against 60 ms, 20 of 20 separable);
now unknown names are checked against a dummy argon2 hash of the same cost. Printed: the
medians, their ratio, and how many of the unknown answers fall inside the known answers'
range (all of them, when the two cannot be told apart).

    .venv/bin/python benchmarks/bench_login_timing.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "fuzz"))

from fastapi.testclient import TestClient  # noqa: E402
from inprocess_support import inprocess_app  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    no_account_limit = {"login_attempts_per_window": 10**6}  # the per-address rule stays
    with tempfile.TemporaryDirectory() as root, \
            inprocess_app(Path(root), **no_account_limit) as env:
        made = env.client.post("/api/v1/auth/signup", json={
            "username": "vic", "email": "vic@uni.example.org", "password": "correct horse"})
        assert made.status_code == 201, made.text
        times: dict[str, list[float]] = {"known": [], "unknown": []}
        for i in range(args.rounds):
            for kind, name in (("known", "vic"), ("unknown", f"nobody{i}")):
                client = TestClient(env.client.app, client=(f"10.{i % 250}.{len(times[kind])}.1",
                                                            40000))
                start = time.perf_counter()
                answer = client.post("/api/v1/auth/token",
                                     json={"username": name, "password": f"guess {i}"})
                times[kind].append((time.perf_counter() - start) * 1000)
                assert answer.status_code == 401, answer.text
    known, unknown = times["known"], times["unknown"]
    inside = sum(min(known) <= t <= max(known) for t in unknown)
    print(f"wrong password, median of {args.rounds}: known user "
          f"{statistics.median(known):.1f} ms, unknown user {statistics.median(unknown):.1f} ms "
          f"(ratio {statistics.median(known) / statistics.median(unknown):.2f}); "
          f"{inside} of {len(unknown)} unknown answers inside the known answers' range")


if __name__ == "__main__":
    main()
