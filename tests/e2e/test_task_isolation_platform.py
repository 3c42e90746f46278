"""Task isolation on the real platform (issue 11): through HTTP, the Celery worker and the Docker
sandbox, a submission that links images across test tasks through every channel it can reach —
module state, files in every writable path, a daemon on abstract and path sockets, System V and
POSIX shared memory — and probes the supervisor's /proc, ptrace and the task channel, scores at
chance. `tests/unit/runner/test_task_isolation.py` shows the same code scoring high when its
tasks share a process.

Issue 34.1: the cooc cheat with its memory in the page cache (a Bloom filter of counters in the
residency of a large shipped file's pages and of a learner file meta-train wrote past the page
cache) scores at chance too: every page a task can read is resident from before the first task
(the private tmpfs copy, the worker's pre-fault), and its log shows it never found one that was
not. `tests/unit/runner/test_task_isolation_page_cache.py` shows it scoring 0.85 where the files
are read in place from evicted pages."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from platform_support import Platform

from submission_api.submission_zip import build_submission_zip

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from isolation_attack import write_attack  # noqa: E402 - path above
from isolation_page_cache_attack import write_attack as write_page_cache_attack  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]
RESET_DENTRIES = True  # isolation measured as deployed: the worker's dentry reset on (conftest)


@pytest.fixture(scope="module")
def attacks(platform: Platform, tiny_collection: Path, arena_cache: Path,
            tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Both attacks submitted before one worker starts: it runs them back to back (one slot,
    so that neither run shares the host with the other), while each test waits for its own."""
    organizer = platform.create_user("organizer", "organizer")
    data = platform.register_collection(tiny_collection, arena_cache)
    folder = tmp_path_factory.mktemp("attacks")
    cross = platform.create_phase(organizer, data, time_limit_s=900,
                                  protocol={"name": "cross-domain", "tasks_per_dataset": 30})
    # 2-way 5-shot over per-run pools: a class's whole support pool in every task (one name
    # across tasks), each query image in a third of its domain's 30 tasks.
    fixed = platform.create_phase(organizer, data, time_limit_s=900, protocol={
        "name": "fixed", "n_ways": 2, "n_shots": 5, "n_queries": 20, "tasks_per_dataset": 30,
        "test_pools": "per_run"})
    alice, mallory = platform.create_user("alice"), platform.create_user("cache-mallory")
    linking = build_submission_zip(write_attack(folder / "attack"), folder / "attack.zip")
    page_cache = build_submission_zip(write_page_cache_attack(folder / "cache-attack"),
                                      folder / "cache-attack.zip")
    ids = {"linking": platform.submit(alice, cross, linking),
           "page_cache": platform.submit(mallory, fixed, page_cache)}
    platform.start_worker("isolation")
    return {"ids": ids, "alice": alice, "mallory": mallory}


def test_linking_images_across_tasks_scores_at_chance_in_the_sandbox(platform: Platform,
                                                                     attacks: dict):
    final = platform.wait_terminal(attacks["alice"], attacks["ids"]["linking"], timeout_s=900)

    # A probe that reads the supervisor or reaches the channel raises: the run would fail.
    assert final["state"] == "finished", final
    assert abs(final["score"]) <= max(final.get("ci95") or 0.0, 0.02), final


def test_keeping_memory_in_the_page_cache_scores_at_chance_in_the_sandbox(platform: Platform,
                                                                          attacks: dict):
    mallory, submission = attacks["mallory"], attacks["ids"]["page_cache"]
    final = platform.wait_terminal(mallory, submission, timeout_s=1800)

    assert final["state"] == "finished", final
    assert abs(final["score"]) <= max(final.get("ci95") or 0.0, 0.02), final
    with platform.api(mallory) as api:
        log = api.get(f"/api/v1/submissions/{submission}/logs").raise_for_status().json()
    touches = re.findall(r"PAGE-CACHE-ATTACK cold (\d+) of (\d+)", log["runs"][0]["log"])
    assert touches, log["runs"][0]["log"][-3000:]
    # Not one page it touched, in any task, was not resident: the residency it reads is constant.
    assert all(cold == "0" and int(touched) > 0 for cold, touched in touches), touches
