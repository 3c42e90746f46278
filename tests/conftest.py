"""Fixtures shared by every test tier (a tiny generated Meta-Album collection and its cache),
and the tiers themselves: each test is marked by the folder it lives in, so that
`bash scripts/test.sh -m unit` runs the unit tier alone.

- unit: no processes, no network, no database (tests/unit, less `SPAWNING_UNIT_FILES`);
- integration: real Postgres, Redis, Docker or processes (tests/integration, authz, fuzz, and
  the unit files that spawn processes or open sockets); `docker` as well under
  tests/integration/sandbox;
- e2e: the whole platform or an HTTP client against it (tests/e2e, faults, load, adversarial);
- browser: headless Chromium (tests/browser).

Under pytest-xdist (`scripts/test.sh` runs `-n 3`), a file is a unit of
work that one worker runs whole (its module fixtures built once), the longest first; the files
in `SERIAL_PATHS` form one unit together, run in order (docs/testing.md). Each worker has its
own Redis database (`claim_redis_database`). Without xdist, or with `-n 0`, nothing changes.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import time
from collections import defaultdict
from pathlib import Path

import pytest
from arena_test_services import (
    claim_redis_database,
    load_services_env,
    release_redis_database,
)
from rewrite_cache import keep_rewritten_modules

from starting_kit.sample_data import generate_collection

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # a dev extra: without it the suite runs in one process, as before
    LoadScopeScheduling = None

keep_rewritten_modules()  # pytest's rewritten test modules kept outside the tree (its docstring)

TESTS = Path(__file__).resolve().parent
TIERS = {"unit": ("unit",), "integration": ("integration",), "authz": ("integration",),
         "fuzz": ("integration",), "e2e": ("e2e",), "faults": ("e2e",), "load": ("e2e",),
         "adversarial": ("e2e", "docker"), "browser": ("browser",)}
DOCKER_FOLDERS = ("integration/sandbox",)
SPAWNING_UNIT_FILES = frozenset({
    "unit/baselines/test_baselines_with_runner.py", "unit/data/test_data_compiled.py",
    "unit/protocols/test_protocols_determinism.py", "unit/runner/test_cli_run_inputs.py",
    "unit/runner/test_local_run.py", "unit/runner/test_task_isolation.py",
    "unit/sampling/test_sampling_determinism.py",
    "unit/test_dependency_direction.py", "unit/worker/test_worker_client.py",
    "unit/worker/test_worker_local_executor.py", "unit/server/test_queue_inspect.py",
    "unit/server/test_queue_warm.py",
    # found by tests/unit/conftest.py's check (issue 35.6)
    "unit/runner/test_meta_train_residency_oracles.py", "unit/runner/test_progress_plain.py",
    "unit/runner/test_run_phase_datasets.py", "unit/runner/test_task_heap.py",
    "unit/runner/test_task_isolation_census.py", "unit/runner/test_task_isolation_hostile.py",
    "unit/runner/test_task_isolation_seccomp.py", "unit/runner/test_task_server_faults.py",
    "unit/runner/test_task_stdio.py", "unit/runner/test_task_determinism.py",
    "unit/sampling/test_neurips22_zip_runs.py", "unit/server/test_demo_launch.py",
    "unit/server/test_secret_settings.py", "unit/test_tutorial_install.py",
    "unit/test_readme_deployment.py",
    "unit/worker/test_hostile_participant_output.py", "unit/worker/test_worker_live_tail.py",
    "unit/runner/test_sweep_strays.py",
})
"""Files under tests/unit that start processes or open internet sockets: they run in the
integration tier until they are split (what they check needs a real process or a real socket).
tests/unit/conftest.py fails a test marked unit that does either, so this list stays true."""

SERIAL_GROUP = "serial"
SERIAL_PATHS: tuple[str, ...] = (
    "e2e/test_competition_rehearsal.py",
)
"""Files that one xdist worker runs in order, never beside each other (paths under tests/: the
scheduler sees node ids only). Nothing else needs it now: each test process has its own Redis
database (`claim_redis_database`), each platform its own queue and Postgres database, each
sandbox test counts only its own containers (by label), and the fault-injection suite its own
Redis and Postgres. List here only what shares something on the host with another listed file."""


FOLDER_COST_S = {"e2e": 20.0, "faults": 23.0, "load": 29.0, "adversarial": 5.0, "browser": 4.0,
                 "authz": 5.0, "integration/worker": 7.0, "integration/sandbox": 2.0,
                 "integration/server": 0.4, "fuzz": 0.3, "unit": 0.3}
"""Seconds a test of each folder takes, roughly (docs/testing.md): the scheduler's guess of a
unit's length where the cache holds no measure of it (`UNIT_SECONDS_KEY`)."""
UNIT_SECONDS_KEY = "arena/seconds-per-xdist-unit"
"""Where the pytest cache keeps each unit's measured seconds (setup + call + teardown)."""
UNIT_SECONDS_FILE = TESTS / "xdist_unit_seconds.json"
"""The units' seconds of a whole run, committed: a fresh clone (CI) has no pytest cache, and a
per-folder guess put files that run for minutes with a test or two (the pools across hosts, the
page-cache and torchvision checks) among the last, to run alone while the other worker idled.
Refresh after a whole run: `cp .pytest_cache/v/arena/seconds-per-xdist-unit` to this file."""
_UNIT_SPENT: defaultdict[str, float] = defaultdict(float)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test with the tiers of its folder (`TIERS`, `SPAWNING_UNIT_FILES`)."""
    for item in items:
        try:
            relative = Path(str(item.fspath)).resolve().relative_to(TESTS).as_posix()
        except ValueError:
            continue
        tiers = TIERS.get(relative.split("/", 1)[0], ())
        if relative in SPAWNING_UNIT_FILES:
            tiers = ("integration",)
        if relative.startswith(DOCKER_FOLDERS):
            tiers = (*tiers, "docker")
        for tier in tiers:
            item.add_marker(getattr(pytest.mark, tier))


def xdist_unit(nodeid: str) -> str:
    """The unit of work of a test: `SERIAL_GROUP`, or its file (its module fixtures built once)."""
    path = nodeid.split("::", 1)[0].removeprefix("tests/")
    return SERIAL_GROUP if path.startswith(SERIAL_PATHS) else path


if LoadScopeScheduling is not None:
    class SerialGroupScheduling(LoadScopeScheduling):
        """xdist's scope scheduling (a unit goes whole to one worker; the largest first) over
        `xdist_unit`. Not `--dist loadgroup` with xdist_group marks: xdist 3.8 renames the
        marked items by `item._nodeid`, which pytest 9 no longer reads, so marked tests of one
        group were still spread over both workers."""

        def _split_scope(self, nodeid: str) -> str:
            return xdist_unit(nodeid)

        def _assign_work_unit(self, node: object) -> None:
            """The longest unit first (its last run's seconds, else `UNIT_SECONDS_FILE`'s, else
            `FOLDER_COST_S`): a long platform file started last would run alone while the other
            worker idles."""
            cache = getattr(self.config, "cache", None)
            measured = {**committed_unit_seconds(),
                        **(cache.get(UNIT_SECONDS_KEY, {}) if cache is not None else {})}

            def cost(unit: str) -> float:
                if unit in measured:
                    return measured[unit]
                return sum(FOLDER_COST_S.get(_folder(n), 1.0) for n in self.workqueue[unit])

            self.workqueue.move_to_end(max(self.workqueue, key=cost), last=False)
            super()._assign_work_unit(node)


@functools.cache
def committed_unit_seconds() -> dict[str, float]:
    """`UNIT_SECONDS_FILE`'s measures (empty when it is missing or unreadable: then guesses)."""
    try:
        loaded = json.loads(UNIT_SECONDS_FILE.read_text())
    except (OSError, ValueError):
        return {}
    return {str(unit): float(s) for unit, s in loaded.items()} if isinstance(loaded, dict) else {}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Every distributed run keeps `SERIAL_PATHS` on one worker, whatever `--dist` says (but
    `each`, which runs every test on every worker by design)."""
    if config.getvalue("dist") == "each":
        return None
    return SerialGroupScheduling(config, log)


_SPENT: defaultdict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
"""Per test folder: [tests, seconds (setup + call + teardown), CPU seconds (`cpu_s`)], for the
summary below."""
_CPU_MARK = [0.0]


def _cpu_now() -> float:
    """CPU of this test process and of the children it has reaped (servers, workers, CLI runs;
    not the containers, which run under containerd)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def pytest_runtest_logstart(nodeid: str, location: object) -> None:
    _CPU_MARK[0] = _cpu_now()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # noqa: ANN201
    """Each phase's CPU on its report (`cpu_s`; xdist carries a report's extra attributes to
    the controller): the suite is CPU-bound on 2 cores, so CPU, not wall, says what a file costs."""
    outcome = yield
    now = _cpu_now()
    outcome.get_result().cpu_s = round(now - _CPU_MARK[0], 3)
    _CPU_MARK[0] = now


def _folder(nodeid: str) -> str:
    """tests/integration/server/test_x.py::t -> integration/server; tests/e2e/... -> e2e."""
    parts = nodeid.split("::", 1)[0].split("/")
    parts = parts[1:] if parts[0] == "tests" else parts
    return "/".join(parts[:2] if parts[0] == "integration" else parts[:1])


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    spent = _SPENT[_folder(report.nodeid)]
    spent[0] += report.when == "call"
    spent[1] += report.duration
    spent[2] += getattr(report, "cpu_s", 0.0)
    _UNIT_SPENT[xdist_unit(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Keep each unit's seconds for the next run's scheduler (the controller, or a run without
    xdist; the units of this run replace their old measures, the others stay)."""
    cache = getattr(session.config, "cache", None)
    if cache is None or hasattr(session.config, "workerinput") or not _UNIT_SPENT:
        return
    cache.set(UNIT_SECONDS_KEY, {**cache.get(UNIT_SECONDS_KEY, {}),
                                 **{unit: round(s, 2) for unit, s in _UNIT_SPENT.items()}})


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001 - pytest's own type
    """Where the time went, per tier folder: the breakdown docs/testing.md keeps (CPU: the test
    processes' own and their reaped children's, not the containers')."""
    if not _SPENT:
        return
    terminalreporter.section("time per test folder")
    for folder, (count, seconds, cpu) in sorted(_SPENT.items(), key=lambda kv: -kv[1][1]):
        terminalreporter.write_line(f"{seconds:8.1f} s  {cpu:7.1f} s CPU  {count:5d} tests  "
                                    f"{folder}")
    terminalreporter.write_line(f"{sum(v[1] for v in _SPENT.values()):8.1f} s  "
                                f"{sum(v[2] for v in _SPENT.values()):7.1f} s CPU  "
                                f"{sum(v[0] for v in _SPENT.values()):5.0f} tests  all")


# At import, not in pytest_configure: the conftests of the folders named on the command line
# (tests/e2e/conftest.py imports platform_support, which reads ARENA_TEST_PG) are imported right
# after this one, before any hook runs.
load_services_env()
claim_redis_database()
# xdist's workers inherit COLUMNS=80 and LINES from execnet; the CLI's consoles, created when
# their modules are imported, would keep that width for good, and the tests that widen the
# terminal (monkeypatch COLUMNS) would see wrapped output. Without them at import, rich reads
# COLUMNS when it prints, as a participant's terminal does.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
# The tests' own secrets (issue 20): `arena serve` refuses the placeholder, and the test-seed
# secret has no fallback. Subprocess servers and workers inherit them.
os.environ.setdefault("ARENA_SECRET_KEY", "tests-only-secret-key-0123456789abcdef0123456789")
os.environ.setdefault("ARENA_TEST_SEED_SECRET", "tests-only-test-seed-secret-0123456789abcdef01")


def pytest_configure(config: pytest.Config) -> None:
    """An xdist controller runs no test: it gives its Redis database back before it starts its
    workers (pytest_sessionstart), so that each worker claims one of its own."""
    distributed = config.getoption("numprocesses", None) and config.getoption("dist", "no") != "no"
    if distributed and not hasattr(config, "workerinput"):
        release_redis_database()


@pytest.fixture(scope="session")
def tiny_collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 classes x 25 images per domain: enough for any-way any-shot tasks, quick to build."""
    return generate_collection(tmp_path_factory.mktemp("data") / "tiny", n_classes=6, n_images=25)


@pytest.fixture(scope="session")
def arena_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")
