"""The short, CI-sized form of benchmarks/load_platform.py: a real uvicorn server on 127.0.0.1
with 10,000 bulk-inserted submissions, then a bounded mix of uploads, status polls and
leaderboard reads from a few client threads. Asserted: every request got its expected answer.
Throughput and p95 are printed (and written beside the test's temp folder), never asserted: they
depend on the machine; docs/reliability.md records the full benchmark's figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from load_platform import load_platform  # noqa: E402 - needs the path above

pytestmark = [pytest.mark.slow]


def test_loopback_load_with_ten_thousand_submissions_has_no_errors(tmp_path):
    result = load_platform(tmp_path, n_submissions=10_000, n_users=1000, n_requests=240,
                           concurrency=4, max_seconds=90)
    print(json.dumps(result, indent=2))
    (tmp_path / "load.json").write_text(json.dumps(result, indent=2))

    assert result["errors"] == 0, result["first_errors"]
    assert set(result["per_operation"]) == {"upload", "status", "leaderboard"}
    assert result["requests"] > 0
