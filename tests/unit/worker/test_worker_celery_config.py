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
    assert [compute_claim_backoff(n, 2.0) for n in range(3)] == [2.0, 4.0, 8.0]


def test_the_claim_backoff_is_a_setting(monkeypatch: pytest.MonkeyPatch):
    assert WorkerSettings().claim_backoff_s == 10.0
    monkeypatch.setenv("ARENA_WORKER_CLAIM_BACKOFF_S", "2")
    assert WorkerSettings().claim_backoff_s == 2.0


def test_a_job_whose_claim_failed_is_retried_after_the_settings_backoff(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from worker import tasks
    from worker.client import ServerUnavailableError

    def unreachable(*_args: object) -> None:
        raise ServerUnavailableError("down")

    retries: list[dict] = []

    def retry(**options: object) -> Exception:
        retries.append(options)
        return RuntimeError("retried")

    monkeypatch.setattr(tasks, "evaluate_run", unreachable)
    monkeypatch.setattr(tasks, "get_runtime", lambda: None)
    monkeypatch.setattr(tasks, "arm_stop_signal", lambda: None)
    monkeypatch.setattr(tasks, "get_settings",
                        lambda: make_settings(tmp_path, claim_backoff_s=2.0, claim_retries=3))
    monkeypatch.setattr(tasks.evaluate_run_job, "retry", retry)
    with pytest.raises(RuntimeError, match="retried"):
        tasks.evaluate_run_job(7, "token")
    assert retries[0]["countdown"] == 2.0 and retries[0]["max_retries"] == 3
