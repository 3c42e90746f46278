"""Task isolation on the real platform (issue 11): through HTTP, the Celery worker and the Docker
sandbox, a submission that links images across test tasks through every channel it can reach —
module state, files in every writable path, a daemon on abstract and path sockets, System V and
POSIX shared memory — and probes the supervisor's /proc, ptrace and the task channel, scores at
chance. `tests/unit/runner/test_task_isolation.py` shows the same code scoring high when its
tasks share a process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from platform_support import Platform

from submission_api.submission_zip import build_submission_zip

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from isolation_attack import write_attack  # noqa: E402 - path above

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]


def test_linking_images_across_tasks_scores_at_chance_in_the_sandbox(
        platform: Platform, tmp_path: Path, tiny_collection: Path, arena_cache: Path):
    organizer = platform.create_user("organizer", "organizer")
    data = platform.register_collection(tiny_collection, arena_cache)
    phase_id = platform.create_phase(organizer, data, time_limit_s=900,
                                     protocol={"name": "cross-domain", "tasks_per_dataset": 30})
    platform.start_worker("isolation")
    alice = platform.create_user("alice")
    archive = build_submission_zip(write_attack(tmp_path / "attack"), tmp_path / "attack.zip")

    final = platform.wait_terminal(alice, platform.submit(alice, phase_id, archive),
                                   timeout_s=900)

    # A probe that reads the supervisor or reaches the channel raises: the run would fail.
    assert final["state"] == "finished", final
    assert abs(final["score"]) <= max(final.get("ci95") or 0.0, 0.02), final
