"""A NeurIPS'22 submission, unchanged, runs on the platform: it imports `api` from its own copy
and builds torchvision's ResNet-18, which only the `metadl-arena/sandbox:torchvision` image
holds (the image `examples/neurips22` phases name). Uploaded over HTTP, run by a Celery worker
in the Docker sandbox, scored. Kept small: two meta-train tasks, one test task per dataset (two
in all, so a fresh learner is still loaded per task), the tiny generated collection, one core."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from arena_test_services import require_service
from platform_support import Platform

from submission_api.submission_zip import build_submission_zip

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.slow]

IMAGE = "metadl-arena/sandbox:torchvision"

# A prototypical network on torchvision's ResNet-18, written as the 2022 baselines were, beside
# the starting kit's api.py of 2022 (benchmarks/bench_isolation_protonet.py runs it too).
SUBMISSION = Path(__file__).resolve().parents[2] / "examples" / "neurips22" / "resnet18_protonet"


def neurips22_zip(folder: Path) -> Path:
    shutil.copytree(SUBMISSION, folder)
    return build_submission_zip(folder, folder.with_suffix(".zip"))


def test_an_unchanged_neurips22_resnet18_zip_is_scored_in_the_torchvision_sandbox(
        platform: Platform, tiny_collection: Path, arena_cache: Path, tmp_path: Path) -> None:
    try:
        import docker

        docker.from_env().images.get(IMAGE)
    except Exception as error:  # noqa: BLE001 - any failure means no image
        require_service(f"Docker image {IMAGE}",
                        f"{error}; bash scripts/build_sandbox_image.sh torchvision")
    organizer = platform.create_user("tv-organizer", "organizer")
    data = platform.register_collection(tiny_collection, arena_cache)
    phase_id = platform.create_phase(
        organizer, data, image=IMAGE, time_limit_s=900,
        protocol={"name": "cross-domain", "tasks_per_dataset": 1},
        resources={"cpus": 1, "memory_mb": 6144, "gpus": 0})
    # One core, one torch thread: the suite's host has two cores shared by three test
    # processes, where a second thread adds its waits, not speed.
    # No pre-fault of the image: this one is 5.8 GB (25,389 files), read in full before the run
    # (60.7 s at load 30); so much page cache can make the host reclaim, after which every
    # other test worker reads its own image again. What this checks is that the zip runs and is
    # scored, not which pages are resident (test_task_isolation_platform.py keeps the pre-fault).
    platform.start_worker("tv", ARENA_WORKER_MAX_TIME_LIMIT_S="900", ARENA_WORKER_PREFAULT="0")
    participant = platform.create_user("tv-participant")

    submission_id = platform.submit(participant, phase_id, neurips22_zip(tmp_path / "resnet"))
    final = platform.wait_terminal(participant, submission_id, timeout_s=1200)

    assert final["state"] == "finished", final
    assert final["score"] is not None and -1.0 <= final["score"] <= 1.0, final
