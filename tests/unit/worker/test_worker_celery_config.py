"""The Celery app's delivery guarantees, queues and pool size, read from settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from worker.celery_app import (
    EVALUATE_RUN,
    build_celery_config,
    create_celery_app,
    worker_arguments,
)
from worker.settings import WorkerSettings
from worker.tasks import compute_claim_backoff


def make_settings(tmp_path: Path, **values: object) -> WorkerSettings:
    return WorkerSettings(data_dir=tmp_path, name="host", **values)


def test_redelivery_is_preferred_to_loss(tmp_path: Path):
    config = build_celery_config(make_settings(tmp_path))
    assert config["task_acks_late"] is True
    assert config["task_reject_on_worker_lost"] is True
    assert config["worker_prefetch_multiplier"] == 1
    assert config["result_backend"] is None


@pytest.mark.parametrize("limit", [60.0, 6 * 3600.0, 48 * 3600.0])
def test_visibility_timeout_outlasts_the_longest_phase(tmp_path: Path, limit: float):
    config = build_celery_config(make_settings(tmp_path, max_time_limit_s=limit))
    assert config["broker_transport_options"]["visibility_timeout"] > limit


def test_pool_has_one_slot_per_gpu(tmp_path: Path):
    assert build_celery_config(make_settings(tmp_path, gpu_ids=["0", "1", "2"]))[
        "worker_concurrency"] == 3
    assert build_celery_config(make_settings(tmp_path, concurrency=2))["worker_concurrency"] == 2


def test_jobs_route_to_the_first_configured_queue_unless_the_server_names_one(tmp_path: Path):
    config = build_celery_config(make_settings(tmp_path, queues=["phase-7", "gpu"]))
    assert config["task_default_queue"] == "phase-7"
    assert config["task_routes"] == {EVALUATE_RUN: {"queue": "phase-7"}}
    args = worker_arguments(make_settings(tmp_path, queues=["phase-7", "gpu"], gpu_ids=["0"]))
    assert args[args.index("--queues") + 1] == "phase-7,gpu"
    assert args[args.index("--concurrency") + 1] == "1"


def test_filesystem_broker_uses_one_queue_folder_under_the_data_dir(tmp_path: Path):
    options = build_celery_config(make_settings(tmp_path, broker_url="filesystem://"))[
        "broker_transport_options"]
    assert options["data_folder_in"] == options["data_folder_out"] == str(
        tmp_path / "broker" / "queue")
    assert Path(options["control_folder"]).is_dir() and Path(options["processed_folder"]).is_dir()


def test_the_app_registers_the_job_under_its_wire_name(tmp_path: Path):
    app = create_celery_app(make_settings(tmp_path, broker_url="memory://"))
    app.loader.import_default_modules()
    task = app.tasks[EVALUATE_RUN]
    assert task.acks_late and task.reject_on_worker_lost and task.ignore_result


def test_claim_backoff_doubles_up_to_a_ceiling():
    assert [compute_claim_backoff(n) for n in range(3)] == [10.0, 20.0, 40.0]
    assert compute_claim_backoff(30) == 600.0
