"""The census (tests/isolation_census.py) reads the children's counters of its own run's
supervisors only (issue 35.6): it used to read those of every supervisor on the host, so a
census failed ("task 1 started with another counters") whenever another run's supervisor (an
xdist worker beside it, a worker on the same host) reaped a process between two tasks.

Real processes whose command lines name the supervisor module, as a run's do."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from isolation_census import CENSUS_MODEL  # noqa: E402 - path above

pytestmark = pytest.mark.integration
MARK = "submission_api.runner.supervisor"
ROOT = Path(__file__).resolve().parents[2]

SUPERVISOR = """
import os, subprocess, sys
child = os.fork()
if child == 0:  # a reaped child leaves page faults in the supervisor's children's counters
    bytearray(8 << 20)
    os._exit(0)
os.waitpid(child, 0)
if len(sys.argv) > 2:  # a task below a task's outer parent, as the fork server makes it
    subprocess.run([sys.executable, "-c", sys.argv[2]], check=True)
else:
    print("ready", flush=True)
    sys.stdin.read()
"""
OUTER_PARENT = ("import subprocess, sys; "
                "subprocess.run([sys.executable, '-c', {probe!r}], check=True)")
PROBE = ("exec(compile(open({model!r}).read(), 'census', 'exec')); "
         "print(json.dumps(trusted_counters()))")


@pytest.fixture
def census_model(tmp_path: Path) -> Path:
    path = tmp_path / "census_model.py"
    path.write_text(CENSUS_MODEL)
    return path


@pytest.fixture
def foreign_supervisor() -> Iterator[int]:
    """Another run's supervisor on this host, with counters of its own."""
    process = subprocess.Popen([sys.executable, "-c", SUPERVISOR, MARK], cwd=ROOT, text=True,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        yield process.pid
    finally:
        process.kill()
        process.wait(timeout=20)


def test_the_census_ignores_another_runs_supervisor(census_model: Path, foreign_supervisor: int):
    namespace: dict = {}
    exec(compile(census_model.read_text(), "census", "exec"), namespace)  # noqa: S102
    assert str(foreign_supervisor) not in namespace["trusted_counters"]()


def test_the_census_reads_its_own_runs_supervisor(census_model: Path, foreign_supervisor: int):
    task = OUTER_PARENT.format(probe=PROBE.format(model=str(census_model)))
    own = subprocess.Popen([sys.executable, "-c", SUPERVISOR, MARK, task], cwd=ROOT, text=True,
                           stdout=subprocess.PIPE)
    output, _ = own.communicate(timeout=120)
    assert own.returncode == 0, output
    counters = json.loads(output.strip().splitlines()[-1])
    assert str(own.pid) in counters and counters[str(own.pid)][0] > 0, counters
    assert str(foreign_supervisor) not in counters, counters
