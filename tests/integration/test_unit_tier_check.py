"""The unit tier's check (tests/unit/conftest.py) fails a unit test that starts a process or
opens an internet socket, and only those (issue 35.6): run on a small suite of its own, in a
pytest process of its own, with every test marked unit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

UNIT_CONFTEST = Path(__file__).resolve().parents[1] / "unit" / "conftest.py"

CONFTEST = f"""
import importlib.util
import pytest

spec = importlib.util.spec_from_file_location("unit_check", {str(UNIT_CONFTEST)!r})
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)
pytest_runtest_setup = check.pytest_runtest_setup
pytest_runtest_call = check.pytest_runtest_call
pytest_runtest_teardown = check.pytest_runtest_teardown


def pytest_configure(config):
    config.addinivalue_line("markers", "unit: as tests/conftest.py marks it")


def pytest_collection_modifyitems(items):
    for item in items:
        item.add_marker(pytest.mark.unit)
"""

TESTS = """
import multiprocessing, os, socket, subprocess
import pytest

@pytest.fixture
def spawning_fixture():
    subprocess.run(["true"], check=True)

def test_subprocess():
    subprocess.run(["true"], check=True)

def test_a_fixture_that_spawns(spawning_fixture):
    pass

def test_multiprocessing_fork():
    child = multiprocessing.get_context("fork").Process(target=int)
    child.start()
    child.join()

def test_os_system():
    os.system("true")

def test_internet_socket():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))

def test_a_socketpair_is_no_network():
    left, right = socket.socketpair()
    left.close()
    right.close()

def test_plain_code():
    assert sum(range(4)) == 6

import threading
_go, _done = threading.Event(), threading.Event()

def _bind_when_told():
    _go.wait()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
    _done.set()

threading.Thread(target=_bind_when_told, daemon=True).start()  # at import, before any test

def test_a_thread_running_before_the_test_is_not_its_doing():
    _go.set()
    assert _done.wait(10)

def _bind():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))

def test_a_thread_the_test_starts_is_its_doing():
    thread = threading.Thread(target=_bind)
    thread.start()
    thread.join()
"""


def test_the_unit_check_fails_what_spawns_or_opens_a_socket_and_nothing_else(tmp_path: Path):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_sample.py").write_text(TESTS)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider",
                           "-p", "no:xdist", str(tmp_path)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    report = done.stdout
    errored = {line.split("::")[1].split()[0] for line in report.splitlines()
               if line.startswith("ERROR ")}
    passed = {line.split("::")[1].split()[0] for line in report.splitlines()
              if line.startswith("PASSED ")}
    assert errored == {"test_subprocess", "test_a_fixture_that_spawns",
                       "test_multiprocessing_fork", "test_os_system",
                       "test_internet_socket", "test_a_thread_the_test_starts_is_its_doing"}, \
        report[-3000:]
    assert {"test_a_socketpair_is_no_network", "test_plain_code",
            "test_a_thread_running_before_the_test_is_not_its_doing"} <= passed, report[-3000:]
    assert "list its file in SPAWNING_UNIT_FILES" in report, report[-3000:]
