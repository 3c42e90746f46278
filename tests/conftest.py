"""Fixtures shared by every test tier (a tiny generated Meta-Album collection and its cache),
and the tiers themselves: each test is marked by the folder it lives in, so that
`bash scripts/test.sh -m unit` runs the unit tier alone.

- unit: no processes, no network, no database (tests/unit, less `SPAWNING_UNIT_FILES`);
- integration: real Postgres, Redis, Docker or processes (tests/integration, authz, fuzz, and
  the unit files that spawn processes or open sockets); `docker` as well under
  tests/integration/sandbox;
- e2e: the whole platform or an HTTP client against it (tests/e2e, faults, load, adversarial);
- browser: headless Chromium (tests/browser).

Under pytest-xdist (opt-in: `-n auto --maxprocesses 2`; `scripts/test.sh` stays serial until
the four tests that fail under two workers are mended, docs/testing.md), the files in
`SERIAL_PATHS` (Docker, whole platforms, Redis) form one unit of work that a single worker runs
in order, while the workers share every other file, a file at a time (docs/testing.md). Without
xdist, or with `-n 0`, nothing changes.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import pytest
from arena_test_services import claim_redis_database, load_services_env

from starting_kit.sample_data import generate_collection

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # a dev extra: without it the suite runs in one process, as before
    LoadScopeScheduling = None

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
})
"""Files under tests/unit that start processes or open sockets: they run in the integration
tier until they are split (what they check needs a real process or a real socket)."""

SERIAL_GROUP = "serial: docker, platforms, redis"
SERIAL_PATHS = ("adversarial/", "faults/", "integration/deploy/", "integration/sandbox/",
                "integration/worker/", "integration/server/test_celery_queue.py",
                "e2e/test_competition_rehearsal.py",
                "e2e/test_neurips22_torchvision.py", "e2e/test_platform_end_to_end.py",
                "e2e/test_secret_phase_platform.py", "e2e/test_task_isolation_platform.py")
"""What one xdist worker runs in order, never beside each other: Docker sandboxes (the sandbox
tests count the host's containers), whole platforms (every e2e platform's workers read queue
`arena` on Redis db 13: two platforms at once take each other's jobs; the hardened and faulty
ones add restarts and SIGKILLs), Compose, Celery workers on Redis. Paths under tests/: the
scheduler sees node ids only. `SERIAL_FIXTURES` keeps the list true."""
SERIAL_FIXTURES = frozenset({"platform", "hardened_platform", "faulty_platform", "services",
                             "docker_client", "redis_client"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        try:
            relative = Path(str(item.fspath)).resolve().relative_to(TESTS).as_posix()
        except ValueError:
            continue
        check_serial(item, relative)
        tiers = TIERS.get(relative.split("/", 1)[0], ())
        if relative in SPAWNING_UNIT_FILES:
            tiers = ("integration",)
        if relative.startswith(DOCKER_FOLDERS):
            tiers = (*tiers, "docker")
        for tier in tiers:
            item.add_marker(getattr(pytest.mark, tier))


def check_serial(item: pytest.Item, relative: str) -> None:
    """A test that asks for a platform, Docker or Redis outside `SERIAL_PATHS` would run beside
    the others under xdist: refuse the collection until its file is listed."""
    fixtures = set(getattr(item, "fixturenames", ()))
    callspec = getattr(item, "callspec", None)  # a parametrized argument is no fixture
    fixtures -= set(callspec.params) if callspec is not None else set()
    used = sorted(fixtures & SERIAL_FIXTURES)
    if used and not relative.startswith(SERIAL_PATHS):
        raise pytest.UsageError(f"{item.nodeid} uses {used}: add {relative!r} to SERIAL_PATHS "
                                "in tests/conftest.py, or xdist may run it beside a platform")


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


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """Every distributed run keeps `SERIAL_PATHS` on one worker, whatever `--dist` says (but
    `each`, which runs every test on every worker by design)."""
    if config.getvalue("dist") == "each":
        return None
    return SerialGroupScheduling(config, log)


_SPENT: defaultdict[str, list[float]] = defaultdict(lambda: [0, 0.0])
"""Per test folder: [tests, seconds (setup + call + teardown)], for the summary below."""


def _folder(nodeid: str) -> str:
    """tests/integration/server/test_x.py::t -> integration/server; tests/e2e/... -> e2e."""
    parts = nodeid.split("::", 1)[0].split("/")
    parts = parts[1:] if parts[0] == "tests" else parts
    return "/".join(parts[:2] if parts[0] == "integration" else parts[:1])


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    spent = _SPENT[_folder(report.nodeid)]
    spent[0] += report.when == "call"
    spent[1] += report.duration


def pytest_terminal_summary(terminalreporter) -> None:  # noqa: ANN001 - pytest's own type
    """Where the time went, per tier folder: the breakdown docs/testing.md keeps."""
    if not _SPENT:
        return
    terminalreporter.section("time per test folder")
    for folder, (count, seconds) in sorted(_SPENT.items(), key=lambda kv: -kv[1][1]):
        terminalreporter.write_line(f"{seconds:8.1f} s  {count:5d} tests  {folder}")
    terminalreporter.write_line(f"{sum(s for _, s in _SPENT.values()):8.1f} s  "
                                f"{sum(c for c, _ in _SPENT.values()):5d} tests  all")


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


@pytest.fixture(scope="session")
def tiny_collection(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 classes x 25 images per domain: enough for any-way any-shot tasks, quick to build."""
    return generate_collection(tmp_path_factory.mktemp("data") / "tiny", n_classes=6, n_images=25)


@pytest.fixture(scope="session")
def arena_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")
