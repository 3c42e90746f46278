"""Each xdist worker claims a Redis database of its own (issue 35.7): the controller, whose
environment the workers inherit, gives its claim back before it starts them (on 069b8e6 both
workers inherited the controller's ARENA_TEST_REDIS and shared one database). Run on a pytest
of its own with two workers, the suite's conftest and two files that say where they ran."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PROBE = """
import os, time
from pathlib import Path

def test_where():
    time.sleep(2)  # both workers get a file
    Path(os.environ["PROBE_OUT"], os.environ["PYTEST_XDIST_WORKER"]).write_text(
        os.environ["ARENA_TEST_REDIS"])
"""


def test_two_workers_hold_two_redis_databases(tmp_path: Path):
    suite, out = tmp_path / "tests", tmp_path / "out"
    suite.mkdir()
    out.mkdir()
    for name in ("conftest.py", "arena_test_services.py", "rewrite_cache.py"):
        shutil.copy(TESTS / name, suite / name)
    for name in ("test_probe_a.py", "test_probe_b.py"):
        (suite / name).write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "ARENA_TEST_REDIS"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "-p",
                           "no:cacheprovider", str(suite)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env={**env, "PROBE_OUT": str(out)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    claims = {path.name: path.read_text() for path in out.iterdir()}
    assert set(claims) == {"gw0", "gw1"}, claims
    assert len(set(claims.values())) == 2, claims
